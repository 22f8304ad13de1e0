#include "kernels/cpu/packed_conv.h"

#include <dnnl.hpp>

#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/onednn_engine.h"
#include "kernels/cpu/threading.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/workspace.h"

namespace planrt::kernels::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

constexpr size_t kMaxShapes = 64;
constexpr size_t kMaxIdleBindings = 8;  // callers running one convolution at once, kept

int64_t conv2d_macs(const Conv2dPlan& p, int64_t n) {
  const double macs = static_cast<double>(n) * static_cast<double>(p.k) * static_cast<double>(p.c / p.groups) *
                      static_cast<double>(p.window.kh * p.window.kw) * static_cast<double>(p.oh * p.ow);
  return macs >= 9.0e18 ? INT64_MAX : static_cast<int64_t>(macs);
}

dnnl::engine& cpu_engine() { return onednn_cpu_engine(); }
ErrorCode code_of(dnnl_status_t s) { return onednn_error_code(s); }

// The weight as the program holds it (kernel.h): [K, C/g, KH, KW], or [K, KH, KW, C/g]
// channels-last.
Shape weight_shape(const Conv2dPlan& p) {
  const int64_t cg = p.c / p.groups;
  return p.channels_last ? Shape({p.k, p.window.kh, p.window.kw, cg}) : Shape({p.k, cg, p.window.kh, p.window.kw});
}

// oneDNN's logical weight dims (whatever the memory order).
memory::dims weight_dims(const Conv2dPlan& p) {
  if (p.groups == 1) return {p.k, p.c, p.window.kh, p.window.kw};
  return {p.groups, p.k / p.groups, p.c / p.groups, p.window.kh, p.window.kw};
}

}  // namespace

struct PackedConv::State {
  memory::desc weights_desc;
  std::shared_ptr<PackedWeightArena> arena;  // holds the blocked copy, when given
  memory weights;  // the blocked copy (owns it when there is no arena)
  // The memory objects and argument maps of one call, made once and pointed at each call's
  // operands (set_data_handle): making them took ~1.6 us per call, ~5% of a batch-1
  // mobilenet_v3_small on one thread (52 convolutions). One set per concurrent caller: a call
  // takes an idle set (or makes one) under the state's mutex and gives it back after.
  struct Bindings {
    memory x, y, x_last, y_last, pad, bias;
    std::unordered_map<int, memory> conv_args, to_last_args, from_last_args;
  };
  struct Prepared {
    dnnl::convolution_forward conv;
    dnnl::reorder to_channels_last, from_channels_last;  // empty when the program is channels-last
    memory::desc scratchpad;
    // oneDNN found only its reference convolution for this batch with the weight's layout
    // (seen for 1x1 convolutions of 1x1 images at batch 8 on a layout chosen at batch 1: 3.6 ms
    // where im2col + sgemm takes microseconds): the call runs the plain kernel instead.
    bool reference = false;
    std::vector<std::unique_ptr<Bindings>> idle;  // guarded by State::mu
  };
  static std::shared_ptr<Prepared> prepare(const Conv2dPlan& p, int64_t n,
                                           const dnnl::convolution_forward::primitive_desc& pd) {
    dnnl::engine& e = cpu_engine();
    const memory::desc x({n, p.c, p.h, p.w}, Type::f32, Tag::nchw), x_last({n, p.c, p.h, p.w}, Type::f32, Tag::nhwc);
    const memory::desc y({n, p.k, p.oh, p.ow}, Type::f32, Tag::nchw), y_last({n, p.k, p.oh, p.ow}, Type::f32, Tag::nhwc);
    auto out = std::make_shared<Prepared>();
    out->conv = dnnl::convolution_forward(pd);
    out->scratchpad = pd.scratchpad_desc();
    out->reference = std::string_view(pd.impl_info_str()).starts_with("ref");
    if (!p.channels_last) {
      out->to_channels_last = dnnl::reorder(dnnl::reorder::primitive_desc(e, x, e, x_last));
      out->from_channels_last = dnnl::reorder(dnnl::reorder::primitive_desc(e, y_last, e, y));
    }
    return out;
  }
  // A call's bindings for batch n, pointing nowhere yet.
  static std::unique_ptr<Bindings> bind(const Conv2dPlan& p, int64_t n, const Prepared& prepared,
                                        const memory& weights) {
    dnnl::engine& e = cpu_engine();
    auto b = std::make_unique<Bindings>();
    const memory::desc x_last({n, p.c, p.h, p.w}, Type::f32, Tag::nhwc);
    const memory::desc y_last({n, p.k, p.oh, p.ow}, Type::f32, Tag::nhwc);
    b->x_last = memory(x_last, e, nullptr);
    b->y_last = memory(y_last, e, nullptr);
    b->pad = memory(prepared.scratchpad, e, nullptr);
    b->conv_args = {{DNNL_ARG_SRC, b->x_last}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, b->y_last},
                    {DNNL_ARG_SCRATCHPAD, b->pad}};
    if (p.has_bias) {
      b->bias = memory(memory::desc({p.k}, Type::f32, Tag::x), e, nullptr);
      b->conv_args.emplace(DNNL_ARG_BIAS, b->bias);
    }
    if (!p.channels_last) {
      b->x = memory(memory::desc({n, p.c, p.h, p.w}, Type::f32, Tag::nchw), e, nullptr);
      b->y = memory(memory::desc({n, p.k, p.oh, p.ow}, Type::f32, Tag::nchw), e, nullptr);
      b->to_last_args = {{DNNL_ARG_FROM, b->x}, {DNNL_ARG_TO, b->x_last}};
      b->from_last_args = {{DNNL_ARG_FROM, b->y_last}, {DNNL_ARG_TO, b->y}};
    }
    return b;
  }
  std::mutex mu;
  // (batch, threads) -> convolution. oneDNN fixes a primitive's thread count when it is made
  // and runs that many whatever OpenMP's setting at the call, so a convolution made at load
  // (process default: every core) ran on two threads in a one-thread method: made in the
  // call, under the run's count (threading.h), and kept per count.
  std::map<std::pair<int64_t, int>, std::shared_ptr<Prepared>> primitives;

  // The convolution for batch n, channels-last in and out; `weights` as given (any: oneDNN's
  // choice, when preparing).
  static dnnl::convolution_forward::primitive_desc describe(const Conv2dPlan& p, int64_t n,
                                                             const memory::desc& weights) {
    const Window2d& w = p.window;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::post_ops ops;
    if (p.activation == ConvActivation::Relu) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    } else if (p.activation == ConvActivation::Clamp) {
      // clip and hard_sigmoid as linear then clip; hard_swish as oneDNN's own (the same
      // x * clamp(x / 6 + 1/2, 0, 1); create() refuses other multiplied clamps).
      const ClampPlan& c = p.clamp;
      if (c.times_x) {
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f);
      } else {
        if (c.scale != 1.0f || c.shift != 0.0f) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, c.scale, c.shift);
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip_v2, c.lo, c.hi);
      }
    }
    if (ops.len() > 0) attr.set_post_ops(ops);
    memory::desc src({n, p.c, p.h, p.w}, Type::f32, Tag::nhwc);
    memory::desc dst({n, p.k, p.oh, p.ow}, Type::f32, Tag::nhwc);
    // oneDNN counts dilation from 0 (no gap), ONNX and PyTorch from 1.
    const memory::dims strides{w.stride_h, w.stride_w}, dilation{w.dilation_h - 1, w.dilation_w - 1};
    const memory::dims pad_l{w.pad_top, w.pad_left}, pad_r{w.pad_bottom, w.pad_right};
    if (p.has_bias) {
      return {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              src, weights, memory::desc({p.k}, Type::f32, Tag::x), dst, strides,
                                              dilation, pad_l, pad_r),
              attr, cpu_engine()};
    }
    return {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            src, weights, dst, strides, dilation, pad_l, pad_r),
            attr, cpu_engine()};
  }
};

PackedConv::PackedConv(const OpAttrs& attrs, const Conv2dPlan& plan, std::unique_ptr<State> state)
    : attrs_(attrs), plan_(plan), state_(std::move(state)) {}
PackedConv::~PackedConv() = default;

uint64_t PackedConv::packed_bytes() const { return state_->weights_desc.get_size(); }

Result<std::unique_ptr<PackedConv>> PackedConv::create(const OpAttrs& attrs, const Conv2dPlan& plan,
                                                       const TensorView& weight,
                                                       std::shared_ptr<PackedWeightArena> arena) {
  const ClampPlan& c = plan.clamp;
  if (plan.activation == ConvActivation::Clamp && c.times_x &&
      (c.scale != 1.0f / 6.0f || c.shift != 0.5f || c.lo != 0.0f || c.hi != 1.0f)) {
    return make_error(ErrorCode::NotSupported, "packed conv2d: oneDNN has no post-op for this multiplied clamp");
  }
  if (weight.dtype != DType::F32 || !weight.is_contiguous() || weight.sizes != weight_shape(plan)) {
    return make_error(ErrorCode::NotSupported, "packed conv2d: the weight ({} {}) is not the plan's f32 {}",
                      dtype_name(weight.dtype), weight.sizes.to_string(), weight_shape(plan).to_string());
  }
  try {
    auto state = std::make_unique<State>();
    const memory::dims dims = weight_dims(plan);
    const auto pd = State::describe(plan, 1, memory::desc(dims, Type::f32, Tag::any));
    state->weights_desc = pd.weights_desc();
    PLANRT_ASSIGN_OR_RETURN(void* storage, packed_weight_storage(arena.get(), state->weights_desc.get_size()));
    state->weights = storage != nullptr ? memory(state->weights_desc, cpu_engine(), storage)
                                        : memory(state->weights_desc, cpu_engine());
    state->arena = std::move(arena);
    const Tag stored = plan.channels_last ? (plan.groups == 1 ? Tag::ohwi : Tag::gohwi)
                                          : (plan.groups == 1 ? Tag::oihw : Tag::goihw);
    memory source(memory::desc(dims, Type::f32, stored), cpu_engine(), weight.data);
    dnnl::stream stream(cpu_engine());
    dnnl::reorder(source, state->weights).execute(stream, source, state->weights);
    stream.wait();
    return std::unique_ptr<PackedConv>(new PackedConv(attrs, plan, std::move(state)));
  } catch (const dnnl::error& e) {
    return make_error(code_of(e.status), "packed conv2d: oneDNN could not prepare the [{}, {}, {}, {}] weight: {}",
                      plan.k, plan.c / plan.groups, plan.window.kh, plan.window.kw, e.what());
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "packed conv2d: cannot allocate the copy of the [{}, {}, {}, {}] weight",
                      plan.k, plan.c / plan.groups, plan.window.kh, plan.window.kw);
  }
}

Status PackedConv::run(const OpAttrs&, std::span<const TensorView> inputs,
                       std::span<const TensorView> outputs) const {
  constexpr std::string_view op = "conv2d";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  // The attributes were read when preparing; the call's shapes are checked against them.
  const Conv2dPlan& p = plan_;
  const int64_t n = inputs[0].rank() == 4 ? inputs[0].sizes[0] : -1;
  const auto image = [&](int64_t c, int64_t h, int64_t w) {
    return p.channels_last ? Shape({n, h, w, c}) : Shape({n, c, h, w});
  };
  if (n < 1 || inputs[0].sizes != image(p.c, p.h, p.w) || outputs[0].sizes != image(p.k, p.oh, p.ow) ||
      outputs[0].dtype != DType::F32 || inputs[1].sizes != weight_shape(p) ||
      (inputs.size() > 2 && !inputs[2].is_none()) != p.has_bias ||
      (p.has_bias && inputs[2].sizes != Shape({p.k}))) {
    return make_error(ErrorCode::InvalidArgument, "{}: operands {} and output {} do not match the prepared convolution "
                      "of [N, {}, {}, {}] into [N, {}, {}, {}]", op, describe_inputs(op, inputs),
                      outputs[0].sizes.to_string(), p.c, p.h, p.w, p.k, p.oh, p.ow);
  }
  const uint64_t workspace = outputs.size() > 1 && !outputs[1].is_none() ? outputs[1].nbytes() : 0;
  const uint64_t x_bytes = inputs[0].nbytes(), y_bytes = outputs[0].nbytes();
  // A small convolution runs on fewer threads than the run allows, made and run under that
  // count (oneDNN fixes a primitive's threads when it is made): forking costs more than it
  // saves below kMacsPerThread per thread (threading.h).
  const int threads = threads_for_work(current_num_threads(), conv2d_macs(p, n), kMacsPerThread);
  std::optional<ThreadCountScope> fewer;
  if (threads < current_num_threads()) fewer.emplace(threads);
  try {
    std::shared_ptr<State::Prepared> prepared;
    std::unique_ptr<State::Bindings> bindings;
    {
      std::lock_guard lock(state_->mu);
      const std::pair<int64_t, int> key{n, threads};
      auto it = state_->primitives.find(key);
      if (it != state_->primitives.end()) {
        prepared = it->second;
      } else {
        prepared = State::prepare(p, n, State::describe(p, n, state_->weights_desc));
        if (state_->primitives.size() < kMaxShapes) state_->primitives.emplace(key, prepared);
      }
      if (!prepared->idle.empty()) {
        bindings = std::move(prepared->idle.back());
        prepared->idle.pop_back();
      }
    }
    const uint64_t scratch = prepared->scratchpad.get_size();
    // A channels-last program gives x and y as oneDNN takes them: no copies in the workspace.
    const uint64_t copies = p.channels_last ? 0 : x_bytes + y_bytes;
    if (prepared->reference || workspace < copies + scratch) return conv2d(attrs_, inputs, outputs);
    if (bindings == nullptr) bindings = State::bind(p, n, *prepared, state_->weights);
    auto* base = static_cast<uint8_t*>(workspace > 0 ? outputs[1].data : nullptr);
    State::Bindings& b = *bindings;
    if (p.has_bias) b.bias.set_data_handle(inputs[2].data);
    // A thread's stream serves every call it makes (oneDNN's CPU streams carry no state
    // between executions but their creation).
    thread_local dnnl::stream stream(cpu_engine());
    if (p.channels_last) {
      b.x_last.set_data_handle(inputs[0].data);
      b.y_last.set_data_handle(outputs[0].data);
      b.pad.set_data_handle(base);
      prepared->conv.execute(stream, b.conv_args);
    } else {
      b.x.set_data_handle(inputs[0].data);
      b.y.set_data_handle(outputs[0].data);
      b.x_last.set_data_handle(base);
      b.y_last.set_data_handle(base + x_bytes);
      b.pad.set_data_handle(base + x_bytes + y_bytes);
      prepared->to_channels_last.execute(stream, b.to_last_args);
      prepared->conv.execute(stream, b.conv_args);
      prepared->from_channels_last.execute(stream, b.from_last_args);
    }
    stream.wait();
    std::lock_guard lock(state_->mu);
    if (prepared->idle.size() < kMaxIdleBindings) prepared->idle.push_back(std::move(bindings));
    return {};
  } catch (const dnnl::error& e) {
    // No convolution for this batch and thread count with the weight's layout (made at load):
    // the plain kernel serves, as a weight oneDNN declined at load would.
    if (e.status == dnnl_unimplemented) return conv2d(attrs_, inputs, outputs);
    return make_error(code_of(e.status), "{}: oneDNN convolution of [{}, {}, {}, {}] failed: {}", op, n, p.c, p.h, p.w,
                      e.what());
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "{}: out of memory preparing the oneDNN convolution of [{}, {}, {}, {}]",
                      op, n, p.c, p.h, p.w);
  }
}

}  // namespace planrt::kernels::cpu
