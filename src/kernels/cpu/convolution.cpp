// conv2d on the host, f32, NCHW or NHWC: im2col into the planned workspace and one product per
// image and group (kernels/cpu/blas.h). This is the kernel every host conv2d can run (weights that
// are values, CPU engines); a conv2d over a constant weight in a host segment runs oneDNN's
// convolution instead (packed_conv.h), prepared at load.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threading.h"
#include "kernels/op_plans.h"
#include "kernels/workspace.h"

namespace planrt::kernels::cpu {
namespace {

// col [cg * kh * kw, oh * ow]: row (ci, r, s) holds x[ci] at every output position shifted
// by the kernel offset (r, s), zero where that falls in the padding.
void im2col(const Conv2dPlan& p, const float* x, float* col, int64_t row_begin, int64_t row_end) {
  const Window2d& w = p.window;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t ci = row / (w.kh * w.kw);
    const int64_t r = row / w.kw % w.kh;
    const int64_t s = row % w.kw;
    const float* plane = x + ci * p.h * p.w;
    float* out = col + row * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy) {
      const int64_t iy = oy * w.stride_h - w.pad_top + r * w.dilation_h;
      float* line = out + oy * p.ow;
      if (iy < 0 || iy >= p.h) {
        std::fill(line, line + p.ow, 0.0f);
        continue;
      }
      const float* src = plane + iy * p.w;
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        const int64_t ix = ox * w.stride_w - w.pad_left + s * w.dilation_w;
        line[ox] = ix >= 0 && ix < p.w ? src[ix] : 0.0f;
      }
    }
  }
}

// Channels-last: col [oh * ow, kh * kw * cg]: row (oy, ox) holds the window of group g at that
// output position, in the weight's [kh, kw, cg] order, zero where it falls in the padding.
void im2row(const Conv2dPlan& p, const float* x, int64_t g, float* col, int64_t pos_begin, int64_t pos_end) {
  const Window2d& w = p.window;
  const int64_t cg = p.c / p.groups;
  const int64_t kk = w.kh * w.kw * cg;
  for (int64_t pos = pos_begin; pos < pos_end; ++pos) {
    const int64_t oy = pos / p.ow, ox = pos % p.ow;
    float* out = col + pos * kk;
    for (int64_t r = 0; r < w.kh; ++r) {
      const int64_t iy = oy * w.stride_h - w.pad_top + r * w.dilation_h;
      for (int64_t s = 0; s < w.kw; ++s, out += cg) {
        const int64_t ix = ox * w.stride_w - w.pad_left + s * w.dilation_w;
        if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) {
          std::fill(out, out + cg, 0.0f);
        } else {
          std::memcpy(out, x + (iy * p.w + ix) * p.c + g * cg, static_cast<size_t>(cg) * sizeof(float));
        }
      }
    }
  }
}

// y [n, oh, ow, k] = rows of the window times the weight [k, kh, kw, cg] transposed, per group.
Status conv2d_channels_last(const Conv2dPlan& p, const float* x, const float* weight, float* y, float* col) {
  const int64_t cg = p.c / p.groups, kg = p.k / p.groups;
  const int64_t kk = cg * p.window.kh * p.window.kw;
  const int64_t positions = p.oh * p.ow;
  PLANRT_RETURN_IF_ERROR(check_gemm_dims("conv2d", positions, kg, kk));
  for (int64_t n = 0; n < p.n; ++n) {
    const float* xn = x + n * p.h * p.w * p.c;
    float* yn = y + n * positions * p.k;
    for (int64_t g = 0; g < p.groups; ++g) {
      // A 1x1 convolution of stride 1 multiplies the image's rows themselves.
      const float* a = xn + g * cg;
      int64_t lda = p.c;
      if (col != nullptr) {
        PLANRT_RETURN_IF_ERROR(parallel_for(positions, 8, [&](int64_t begin, int64_t end) { im2row(p, xn, g, col, begin, end); }));
        a = col;
        lda = kk;
      }
      PLANRT_RETURN_IF_ERROR(gemm_nt(positions, kg, kk, 1.0f, a, lda, weight + g * kg * kk, kk, 0.0f, yn + g * kg, p.k));
    }
  }
  return {};
}

}  // namespace

Status conv2d(const OpAttrs& attrs, std::span<const TensorView> inputs,
              std::span<const TensorView> outputs) {
  constexpr std::string_view op = "conv2d";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(Conv2dPlan p, plan_conv2d(attrs, inputs, outputs));
  const uint64_t col_bytes = conv2d_im2col_bytes(p);
  if (p.workspace_bytes < col_bytes) {
    return make_error(ErrorCode::InvalidArgument,
                      "conv2d: the workspace holds {} bytes; this convolution needs {} (give it "
                      "the builder's planned workspace output)", p.workspace_bytes, col_bytes);
  }
  const int64_t positions = p.oh * p.ow;
  const float* x = inputs[0].data_as<const float>();
  const float* weight = inputs[1].data_as<const float>();
  const float* bias = p.has_bias ? inputs[2].data_as<const float>() : nullptr;
  float* y = outputs[0].data_as<float>();
  float* col = col_bytes == 0 ? nullptr : outputs[1].data_as<float>();
  if (p.channels_last) {
    PLANRT_RETURN_IF_ERROR(conv2d_channels_last(p, x, weight, y, col));
  } else {
    const int64_t cg = p.c / p.groups, kg = p.k / p.groups;
    const int64_t kk = cg * p.window.kh * p.window.kw;
    PLANRT_RETURN_IF_ERROR(check_gemm_dims(op, kg, positions, kk));
    for (int64_t n = 0; n < p.n; ++n) {
      for (int64_t g = 0; g < p.groups; ++g) {
        const float* xg = x + (n * p.c + g * cg) * p.h * p.w;
        float* yg = y + (n * p.k + g * kg) * positions;
        const float* b = xg;  // a 1x1 convolution of stride 1 multiplies the image itself
        if (col != nullptr) {
          PLANRT_RETURN_IF_ERROR(parallel_for(kk, 8, [&](int64_t begin, int64_t end) { im2col(p, xg, col, begin, end); }));
          b = col;
        }
        PLANRT_RETURN_IF_ERROR(gemm_nn(kg, positions, kk, 1.0f, weight + g * kg * kk, kk, b, positions, 0.0f, yg, positions));
      }
    }
  }
  if (bias == nullptr && p.activation == ConvActivation::None) return {};
  const bool relu = p.activation == ConvActivation::Relu;
  const bool clamp = p.activation == ConvActivation::Clamp;
  if (p.channels_last) {
    // Rows of k channels, one per output position.
    return parallel_for(p.n * positions, 64, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        float* out = y + row * p.k;
#pragma omp simd
        for (int64_t i = 0; i < p.k; ++i) {
          const float v = out[i] + (bias == nullptr ? 0.0f : bias[i]);
          out[i] = relu && v < 0.0f ? 0.0f : v;
        }
        if (clamp) map_clamp(p.clamp, out, out, p.k);
      }
    });
  }
  return parallel_for(p.n * p.k, 16, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const float add = bias == nullptr ? 0.0f : bias[plane % p.k];
      float* out = y + plane * positions;
#pragma omp simd
      for (int64_t i = 0; i < positions; ++i) {
        const float v = out[i] + add;
        out[i] = relu && v < 0.0f ? 0.0f : v;
      }
      if (clamp) map_clamp(p.clamp, out, out, positions);
    }
  });
}

}  // namespace planrt::kernels::cpu
