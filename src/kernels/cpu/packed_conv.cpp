#include "kernels/cpu/packed_conv.h"

#include <dnnl.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <algorithm>
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

// Winograd's F(2x2, 3x3) and F(4x4, 3x3) (oneDNN's jit_fp32_wino_2x3 and jit_wino_4x3) take
// 3x3 windows of stride 1 without dilation over one group.
bool winograd_shape(const Conv2dPlan& p) {
  const Window2d& w = p.window;
  return p.groups == 1 && w.kh == 3 && w.kw == 3 && w.stride_h == 1 && w.stride_w == 1 && w.dilation_h == 1 &&
         w.dilation_w == 1;
}

// PLANRT_CPU_WINOGRAD=0 keeps every convolution direct (A/B measurement, bit-stable runs).
bool winograd_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("PLANRT_CPU_WINOGRAD");
    return v == nullptr || std::string_view(v) != "0";
  }();
  return allowed;
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
  // A Winograd weight layout oneDNN offered at load, packed once (see create()).
  struct WinogradWeights {
    memory::desc desc;
    memory weights;
  };
  std::vector<WinogradWeights> winograd;
  struct WinogradBindings {
    memory x, y, pad;  // blocked (nChw16c) copies in the workspace, and the scratchpad
    std::unordered_map<int, memory> conv_args, to_blocked_args, from_blocked_args;
  };
  struct Bindings {
    memory x, y, x_last, y_last, pad, bias;
    std::unordered_map<int, memory> conv_args, to_last_args, from_last_args;
    std::vector<WinogradBindings> winograd;  // one per Prepared::winograd
  };
  // A Winograd convolution at one batch over one of the packed layouts: oneDNN's Winograd
  // kernels read and write blocked images, so the call reorders x into the workspace and the
  // result out of it.
  struct WinogradPrepared {
    dnnl::convolution_forward conv;
    dnnl::reorder to_blocked, from_blocked;
    memory::desc x, y, scratchpad;
    size_t layout = 0;  // into State::winograd
    uint64_t workspace_bytes() const { return x.get_size() + y.get_size() + scratchpad.get_size(); }
  };
  struct Prepared {
    dnnl::convolution_forward conv;
    dnnl::reorder to_channels_last, from_channels_last;  // empty when the program is channels-last
    memory::desc scratchpad;
    // oneDNN found only its reference convolution for this batch with the weight's layout
    // (seen for 1x1 convolutions of 1x1 images at batch 8 on a layout chosen at batch 1: 3.6 ms
    // where im2col + sgemm takes microseconds): the call runs the plain kernel instead.
    bool reference = false;
    std::vector<WinogradPrepared> winograd;  // the packed layouts oneDNN runs at this batch
    // Which runs: kUndecided until the first call that finds more than one candidate times
    // them on its own operands (kDeciding meanwhile: other callers run the direct one); then
    // kDirect or 1 + the index of the Winograd one.
    static constexpr int kUndecided = -1, kDeciding = -2, kDirect = 0;
    std::atomic<int> choice{kUndecided};
    std::vector<std::unique_ptr<Bindings>> idle;  // guarded by State::mu
  };
  static std::shared_ptr<Prepared> prepare(const Conv2dPlan& p, int64_t n,
                                           const dnnl::convolution_forward::primitive_desc& pd,
                                           const std::vector<WinogradWeights>& layouts) {
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
    for (size_t i = 0; i < layouts.size(); ++i) {
      std::optional<dnnl::convolution_forward::primitive_desc> wpd = describe_winograd(p, n, layouts[i].desc);
      if (!wpd) continue;
      WinogradPrepared w;
      w.conv = dnnl::convolution_forward(*wpd);
      w.x = wpd->src_desc();
      w.y = wpd->dst_desc();
      w.scratchpad = wpd->scratchpad_desc();
      w.layout = i;
      w.to_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(e, p.channels_last ? x_last : x, e, w.x));
      w.from_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(e, w.y, e, p.channels_last ? y_last : y));
      out->winograd.push_back(std::move(w));
    }
    return out;
  }
  // A call's bindings for batch n, pointing nowhere yet.
  static std::unique_ptr<Bindings> bind(const Conv2dPlan& p, int64_t n, const Prepared& prepared,
                                        const State& state) {
    const memory& weights = state.weights;
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
    // The image as the program holds it, which the Winograd reorders read and write.
    const memory& x_given = p.channels_last ? b->x_last : b->x;
    const memory& y_given = p.channels_last ? b->y_last : b->y;
    for (const WinogradPrepared& w : prepared.winograd) {
      WinogradBindings wb;
      wb.x = memory(w.x, e, nullptr);
      wb.y = memory(w.y, e, nullptr);
      wb.pad = memory(w.scratchpad, e, nullptr);
      wb.conv_args = {{DNNL_ARG_SRC, wb.x}, {DNNL_ARG_WEIGHTS, state.winograd[w.layout].weights},
                      {DNNL_ARG_DST, wb.y}, {DNNL_ARG_SCRATCHPAD, wb.pad}};
      if (p.has_bias) wb.conv_args.emplace(DNNL_ARG_BIAS, b->bias);
      wb.to_blocked_args = {{DNNL_ARG_FROM, x_given}, {DNNL_ARG_TO, wb.x}};
      wb.from_blocked_args = {{DNNL_ARG_FROM, wb.y}, {DNNL_ARG_TO, y_given}};
      b->winograd.push_back(std::move(wb));
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
  static dnnl::convolution_forward::primitive_desc describe(
      const Conv2dPlan& p, int64_t n, const memory::desc& weights,
      dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct) {
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
    // Winograd's kernels take blocked images only (the call reorders), the direct ones
    // channels-last.
    const Tag image = algorithm == dnnl::algorithm::convolution_winograd ? Tag::nChw16c : Tag::nhwc;
    memory::desc src({n, p.c, p.h, p.w}, Type::f32, image);
    memory::desc dst({n, p.k, p.oh, p.ow}, Type::f32, image);
    // oneDNN counts dilation from 0 (no gap), ONNX and PyTorch from 1.
    const memory::dims strides{w.stride_h, w.stride_w}, dilation{w.dilation_h - 1, w.dilation_w - 1};
    const memory::dims pad_l{w.pad_top, w.pad_left}, pad_r{w.pad_bottom, w.pad_right};
    if (p.has_bias) {
      return {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm,
                                              src, weights, memory::desc({p.k}, Type::f32, Tag::x), dst, strides,
                                              dilation, pad_l, pad_r),
              attr, cpu_engine()};
    }
    return {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm,
                                            src, weights, dst, strides, dilation, pad_l, pad_r),
            attr, cpu_engine()};
  }

  // oneDNN's Winograd convolution at batch n over `weights` (a packed layout, or any), its
  // first implementation that is not a reference one; nullopt when it has none.
  static std::optional<dnnl::convolution_forward::primitive_desc> describe_winograd(const Conv2dPlan& p, int64_t n,
                                                                                   const memory::desc& weights) {
    try {
      auto pd = describe(p, n, weights, dnnl::algorithm::convolution_winograd);
      if (std::string_view(pd.impl_info_str()).find("wino") == std::string_view::npos) return std::nullopt;
      return pd;
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) return std::nullopt;
      throw;
    }
  }

  // Winograd's weights are 1.8x (F(2x2, 3x3)) to 4x (F(4x4, 3x3)) the direct ones; a layout is
  // kept only where they are no larger than the images one call transforms. That bounds the
  // extra memory by the activations' scale, and leaves out the layers of many channels on
  // small images, where the transforms measured slower or gained little (resnet18's 256- and
  // 512-channel layers at batch 8: 0.6–0.8x; all of them would have added ~97 MiB).
  static bool weights_within_images(const dnnl::convolution_forward::primitive_desc& pd) {
    return pd.weights_desc().get_size() <= pd.src_desc().get_size() + pd.dst_desc().get_size();
  }

  // The Winograd weight layouts oneDNN picks at batch 1 and at `max_batch` (it picks F(2x2,
  // 3x3) or F(4x4, 3x3) by shape and batch, and each has its own layout), packed from
  // `source` (the weight as the program holds it).
  void pack_winograd(const Conv2dPlan& p, int64_t max_batch, memory source, PackedWeightArena* arena_ptr) {
    if (!winograd_allowed() || !winograd_shape(p)) return;
    const Result<uint64_t> workspace = conv2d_host_workspace_bytes_per_image(p);
    if (!workspace.ok()) return;
    const uint64_t per_image = *workspace;
    const memory::desc any(weight_dims(p), Type::f32, Tag::any);
    dnnl::stream stream(cpu_engine());
    // oneDNN reorders into a Winograd layout from the plain [K, C, 3, 3] order only: a
    // channels-last weight goes through a temporary plain copy.
    const memory::desc plain_desc(weight_dims(p), Type::f32, Tag::oihw);
    memory plain = source;
    if (source.get_desc() != plain_desc) {
      plain = memory(plain_desc, cpu_engine());
      dnnl::reorder(source, plain).execute(stream, source, plain);
      stream.wait();
    }
    for (int64_t n : {int64_t{1}, max_batch}) {
      std::optional<dnnl::convolution_forward::primitive_desc> pd = describe_winograd(p, n, any);
      if (!pd) continue;
      // A layout whose blocked copies and scratchpad would not fit the workspace the plan
      // gives a call at this batch could never run: it is not packed (at batch 1, 256- and
      // 512-channel layers of resnet18 would hold 4–16 MiB each for nothing).
      const uint64_t needs = pd->src_desc().get_size() + pd->dst_desc().get_size() + pd->scratchpad_desc().get_size();
      if (needs > per_image * static_cast<uint64_t>(n) || !weights_within_images(*pd)) continue;
      const memory::desc desc = pd->weights_desc();
      bool known = false;
      for (const WinogradWeights& w : winograd) known = known || w.desc == desc;
      if (known) continue;
      // Before the bytes: oneDNN has no reorder into some of the layouts it offers (seen for
      // resnet18's 64-channel layers), and such a layout is left out.
      std::optional<dnnl::reorder::primitive_desc> to_layout;
      try {
        to_layout.emplace(cpu_engine(), plain_desc, cpu_engine(), desc);
      } catch (const dnnl::error& e) {
        if (e.status != dnnl_unimplemented) throw;
        continue;
      }
      Result<void*> storage = packed_weight_storage(arena_ptr, desc.get_size());
      if (!storage.ok()) throw std::bad_alloc();
      WinogradWeights w{desc, *storage != nullptr ? memory(desc, cpu_engine(), *storage) : memory(desc, cpu_engine())};
      dnnl::reorder(*to_layout).execute(stream, plain, w.weights);
      stream.wait();
      winograd.push_back(std::move(w));
    }
  }
};

uint64_t winograd_workspace_bytes_per_image(const Conv2dPlan& plan) {
  if (!winograd_shape(plan)) return 0;
  try {
    Conv2dPlan one = plan;
    one.n = 1;
    const std::optional<dnnl::convolution_forward::primitive_desc> pd =
        PackedConv::State::describe_winograd(one, 1, memory::desc(weight_dims(plan), Type::f32, Tag::any));
    if (!pd || !PackedConv::State::weights_within_images(*pd)) return 0;
    return pd->src_desc().get_size() + pd->dst_desc().get_size() + pd->scratchpad_desc().get_size();
  } catch (...) {  // no Winograd convolution to make room for
    return 0;
  }
}

PackedConv::PackedConv(const OpAttrs& attrs, const Conv2dPlan& plan, std::unique_ptr<State> state)
    : attrs_(attrs), plan_(plan), state_(std::move(state)) {}
PackedConv::~PackedConv() = default;

uint64_t PackedConv::packed_bytes() const {
  uint64_t bytes = state_->weights_desc.get_size();
  for (const State::WinogradWeights& w : state_->winograd) bytes += w.desc.get_size();
  return bytes;
}

size_t PackedConv::winograd_layouts() const { return state_->winograd.size(); }

Result<std::unique_ptr<PackedConv>> PackedConv::create(const OpAttrs& attrs, const Conv2dPlan& plan,
                                                       const TensorView& weight,
                                                       std::shared_ptr<PackedWeightArena> arena, int64_t max_batch) {
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
    const Tag stored = plan.channels_last ? (plan.groups == 1 ? Tag::ohwi : Tag::gohwi)
                                          : (plan.groups == 1 ? Tag::oihw : Tag::goihw);
    memory source(memory::desc(dims, Type::f32, stored), cpu_engine(), weight.data);
    dnnl::stream stream(cpu_engine());
    dnnl::reorder(source, state->weights).execute(stream, source, state->weights);
    stream.wait();
    state->pack_winograd(plan, std::max<int64_t>(1, max_batch), source, arena.get());
    state->arena = std::move(arena);
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
        prepared = State::prepare(p, n, State::describe(p, n, state_->weights_desc), state_->winograd);
        if (state_->primitives.size() < kMaxShapes) state_->primitives.emplace(key, prepared);
      }
      if (!prepared->idle.empty()) {
        bindings = std::move(prepared->idle.back());
        prepared->idle.pop_back();
      }
    }
    // The candidates whose copies and scratchpad fit the planned workspace: the direct
    // convolution (a channels-last program gives x and y as it takes them, an NCHW one copies
    // them through the workspace) and each Winograd one (blocked copies of x and y).
    using Prepared = State::Prepared;
    int candidates[1 + 2];
    size_t count = 0;
    const uint64_t copies = p.channels_last ? 0 : x_bytes + y_bytes;
    if (!prepared->reference && workspace >= copies + prepared->scratchpad.get_size()) candidates[count++] = Prepared::kDirect;
    for (size_t i = 0; i < prepared->winograd.size() && count < std::size(candidates); ++i) {
      if (workspace >= prepared->winograd[i].workspace_bytes()) candidates[count++] = static_cast<int>(i) + 1;
    }
    if (count == 0) return conv2d(attrs_, inputs, outputs);
    if (bindings == nullptr) bindings = State::bind(p, n, *prepared, *state_);
    auto* base = static_cast<uint8_t*>(workspace > 0 ? outputs[1].data : nullptr);
    State::Bindings& b = *bindings;
    if (p.has_bias) b.bias.set_data_handle(inputs[2].data);
    // A thread's stream serves every call it makes (oneDNN's CPU streams carry no state
    // between executions but their creation).
    thread_local dnnl::stream stream(cpu_engine());
    const auto execute = [&](int which) {
      if (p.channels_last) {
        b.x_last.set_data_handle(inputs[0].data);
        b.y_last.set_data_handle(outputs[0].data);
      } else {
        b.x.set_data_handle(inputs[0].data);
        b.y.set_data_handle(outputs[0].data);
      }
      if (which != Prepared::kDirect) {
        const State::WinogradPrepared& w = prepared->winograd[static_cast<size_t>(which - 1)];
        State::WinogradBindings& wb = b.winograd[static_cast<size_t>(which - 1)];
        wb.x.set_data_handle(base);
        wb.y.set_data_handle(base + w.x.get_size());
        wb.pad.set_data_handle(base + w.x.get_size() + w.y.get_size());
        w.to_blocked.execute(stream, wb.to_blocked_args);
        w.conv.execute(stream, wb.conv_args);
        w.from_blocked.execute(stream, wb.from_blocked_args);
      } else if (p.channels_last) {
        b.pad.set_data_handle(base);
        prepared->conv.execute(stream, b.conv_args);
      } else {
        b.x_last.set_data_handle(base);
        b.y_last.set_data_handle(base + x_bytes);
        b.pad.set_data_handle(base + x_bytes + y_bytes);
        prepared->to_channels_last.execute(stream, b.to_last_args);
        prepared->conv.execute(stream, b.conv_args);
        prepared->from_channels_last.execute(stream, b.from_last_args);
      }
    };
    const std::span<const int> fitting(candidates, count);
    int choice = prepared->choice.load(std::memory_order_acquire);
    if (count > 1 && choice == Prepared::kUndecided &&
        prepared->choice.compare_exchange_strong(choice, Prepared::kDeciding, std::memory_order_acq_rel)) {
      // Which is faster depends on the shape, the batch and the core (Winograd's transforms
      // cost more than they save on small images of many channels; docs/performance.md):
      // this first call runs each three times on its own operands and keeps the faster. Each run
      // writes the whole output, so the last one's stands.
      double best_ms[std::size(candidates)];
      std::fill(std::begin(best_ms), std::end(best_ms), 1e300);
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < count; ++i) {
          const auto start = std::chrono::steady_clock::now();
          execute(candidates[i]);
          stream.wait();
          best_ms[i] = std::min(best_ms[i], std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        }
      }
      const size_t fastest = static_cast<size_t>(std::min_element(best_ms, best_ms + count) - best_ms);
      prepared->choice.store(candidates[fastest], std::memory_order_release);
    } else {
      // Decided (and fitting: every call at this batch has the same planned workspace), or
      // being decided by another caller, or only one candidate: the first fitting one.
      const bool decided = choice >= 0 && std::find(fitting.begin(), fitting.end(), choice) != fitting.end();
      execute(decided ? choice : candidates[0]);
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
