// max_pool2d and avg_pool2d on the host, f32, one output row at a time. NCHW: the planes of
// (image, channel) split between threads; NHWC: the rows, every channel of a pixel at once,
// the channels in vector lanes (`omp simd` loops compiled per instruction set,
// PLANRT_SIMD_CLONES): scalar, resnet18's stem pooling took ~17% of its batch-1 run.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threading.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

enum class PoolKind { Max, Average };

// Output row oy of one image whose pixels hold `lanes` values side by side: an NCHW plane
// (lanes 1) or a channels-last image (lanes c). x [h, w, lanes] -> y [ow, lanes]; `acc` holds
// `lanes` doubles for the average. x and y never overlap (an op's input and output).
PLANRT_SIMD_CLONES
void pool_row(const Pool2dPlan& p, PoolKind kind, const float* __restrict x, int64_t lanes, int64_t oy,
              float* __restrict y, double* __restrict acc) {
  const Window2d& w = p.window;
  const int64_t y0 = oy * w.stride_h - w.pad_top;
  for (int64_t ox = 0; ox < p.ow; ++ox) {
    const int64_t x0 = ox * w.stride_w - w.pad_left;
    float* __restrict out = y + ox * lanes;
    if (kind == PoolKind::Max) {
#pragma omp simd
      for (int64_t l = 0; l < lanes; ++l) out[l] = -std::numeric_limits<float>::infinity();
      for (int64_t r = 0; r < w.kh; ++r) {
        const int64_t iy = y0 + r * w.dilation_h;
        if (iy < 0 || iy >= p.h) continue;
        for (int64_t s = 0; s < w.kw; ++s) {
          const int64_t ix = x0 + s * w.dilation_w;
          if (ix < 0 || ix >= p.w) continue;
          const float* __restrict in = x + (iy * p.w + ix) * lanes;
#pragma omp simd
          for (int64_t l = 0; l < lanes; ++l) {
            const float v = in[l], o = out[l];
            out[l] = (v > o || v != v) ? v : o;  // NaN wins, as torch's max pooling gives
          }
        }
      }
      continue;
    }
    // The window within the padded input (its divisor with count_include_pad), then within
    // the input itself.
    const int64_t ys = y0, ye = std::min(y0 + w.kh, p.h + w.pad_bottom);
    const int64_t xs = x0, xe = std::min(x0 + w.kw, p.w + w.pad_right);
    const int64_t padded = (ye - ys) * (xe - xs);
    const int64_t iy0 = std::max<int64_t>(ys, 0), iy1 = std::min(ye, p.h);
    const int64_t ix0 = std::max<int64_t>(xs, 0), ix1 = std::min(xe, p.w);
#pragma omp simd
    for (int64_t l = 0; l < lanes; ++l) acc[l] = 0.0;
    for (int64_t iy = iy0; iy < iy1; ++iy) {
      for (int64_t ix = ix0; ix < ix1; ++ix) {
        const float* __restrict in = x + (iy * p.w + ix) * lanes;
#pragma omp simd
        for (int64_t l = 0; l < lanes; ++l) acc[l] += in[l];
      }
    }
    const auto count = static_cast<double>(p.count_include_pad ? padded : (iy1 - iy0) * (ix1 - ix0));
#pragma omp simd
    for (int64_t l = 0; l < lanes; ++l) out[l] = static_cast<float>(acc[l] / count);
  }
}

Status pool(std::string_view op, PoolKind kind, const OpAttrs& attrs, std::span<const TensorView> inputs,
            std::span<const TensorView> outputs) {
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(Pool2dPlan p, plan_pool2d(op, attrs, inputs, outputs));
  const float* x = inputs[0].data_as<const float>();
  float* y = outputs[0].data_as<float>();
  if (p.channels_last) {
    return parallel_for(p.n * p.oh, 1, [&](int64_t begin, int64_t end) {
      std::vector<double> acc(static_cast<size_t>(p.c));
      for (int64_t row = begin; row < end; ++row) {
        const int64_t n = row / p.oh, oy = row % p.oh;
        pool_row(p, kind, x + n * p.h * p.w * p.c, p.c, oy, y + row * p.ow * p.c, acc.data());
      }
    });
  }
  return parallel_for(p.n * p.c, 4, [&](int64_t begin, int64_t end) {
    double acc = 0.0;
    for (int64_t plane = begin; plane < end; ++plane) {
      for (int64_t oy = 0; oy < p.oh; ++oy) {
        pool_row(p, kind, x + plane * p.h * p.w, 1, oy, y + (plane * p.oh + oy) * p.ow, &acc);
      }
    }
  });
}

}  // namespace

Status max_pool2d(const OpAttrs& attrs, std::span<const TensorView> in, std::span<const TensorView> out) {
  return pool("max_pool2d", PoolKind::Max, attrs, in, out);
}

Status avg_pool2d(const OpAttrs& attrs, std::span<const TensorView> in, std::span<const TensorView> out) {
  return pool("avg_pool2d", PoolKind::Average, attrs, in, out);
}

}  // namespace planrt::kernels::cpu
