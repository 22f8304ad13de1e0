// resize(x) on the CPU (kernels/op_plans.h: plan_resize): ONNX Resize's interpolation, one
// output element at a time, parallel over the outputs. The taps of every position along each
// resized dim are computed once per call (resize_taps, shared with the CUDA kernel's rule);
// an output element is the sum over the product of its dims' taps, accumulated in double.
// Dims the plan marks identity (each position reads x's at its own index) add no taps.
#include <algorithm>
#include <vector>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threading.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

struct ActiveDim {
  int dim = 0;
  int64_t x_stride = 0;
  std::vector<ResizeTaps> taps;  // one per output position along dim
};

}  // namespace

Status resize(const OpAttrs& attrs, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  constexpr std::string_view op = "resize";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(ResizePlan plan, plan_resize(attrs, inputs, outputs));
  const TensorView& x = inputs[0];
  const TensorView& y = outputs[0];
  const int64_t n = y.numel();
  if (n == 0) return {};
  const int rank = x.rank();
  int64_t x_strides[kMaxRank] = {};
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    x_strides[d] = stride;
    stride *= x.sizes[d];
  }
  std::vector<ActiveDim> active;
  int64_t taps_per_output = 1;
  for (int d = 0; d < rank; ++d) {
    const ResizeAxis& axis = plan.axes[d];
    if (axis.identity) continue;
    ActiveDim a;
    a.dim = d;
    a.x_stride = x_strides[d];
    a.taps.reserve(static_cast<size_t>(axis.out));
    for (int64_t i = 0; i < axis.out; ++i) a.taps.push_back(resize_taps(plan.attrs, axis, i));
    active.push_back(std::move(a));
    taps_per_output *= plan.attrs.mode == ResizeMode::Cubic ? 4 : 2;
  }
  const float* xp = x.data_as<const float>();
  float* yp = y.data_as<float>();
  const auto extrapolation = static_cast<float>(plan.attrs.extrapolation);
  const int k = static_cast<int>(active.size());
  auto body = [&](int64_t begin, int64_t end) {
    int64_t coord[kMaxRank];
    const ResizeTaps* taps[kMaxRank];
    int tap[kMaxRank];
    for (int64_t o = begin; o < end; ++o) {
      int64_t rest = o;
      for (int d = rank - 1; d >= 0; --d) {
        coord[d] = rest % y.sizes[d];
        rest /= y.sizes[d];
      }
      int64_t base = 0;
      for (int d = 0; d < rank; ++d) {
        if (plan.axes[d].identity) base += coord[d] * x_strides[d];
      }
      bool outside = false, empty = false;
      for (int a = 0; a < k; ++a) {
        taps[a] = &active[a].taps[coord[active[a].dim]];
        outside = outside || taps[a]->outside;
        empty = empty || taps[a]->count == 0;
        tap[a] = 0;
      }
      if (outside) {
        yp[o] = extrapolation;
        continue;
      }
      if (empty) {  // every weight exactly 0 (not reachable through ONNX's modes)
        yp[o] = 0.0f;
        continue;
      }
      double sum = 0.0;
      while (true) {
        double w = 1.0;
        int64_t offset = base;
        for (int a = 0; a < k; ++a) {
          w *= taps[a]->weight[tap[a]];
          offset += taps[a]->index[tap[a]] * active[a].x_stride;
        }
        sum += w * static_cast<double>(xp[offset]);
        int a = k - 1;
        while (a >= 0 && ++tap[a] == taps[a]->count) tap[a--] = 0;
        if (a < 0) break;
      }
      yp[o] = static_cast<float>(sum);
    }
  };
  return parallel_for(n, std::max<int64_t>(1, kElementsPerThread / taps_per_output), body);
}

}  // namespace planrt::kernels::cpu
