#include "kernels/cpu/packed_linear.h"

#include <dnnl.hpp>

#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/checks.h"
#include "kernels/cpu/onednn_engine.h"
#include "kernels/cpu/threading.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/op_plans.h"

namespace planrt::kernels::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Type = memory::data_type;

// Row counts whose matmul is kept; a method with dynamic dims sees at most its bound's worth.
constexpr size_t kMaxShapes = 64;
constexpr size_t kMaxIdleBindings = 8;  // callers running one product at once, kept
// The row count the blocked layout is chosen for (the kernels then serve any count).
constexpr int64_t kLayoutRows = 128;

dnnl::engine& cpu_engine() { return onednn_cpu_engine(); }
ErrorCode code_of(dnnl_status_t s) { return onednn_error_code(s); }

}  // namespace

struct PackedLinear::State {
  memory::desc weights_desc;
  std::shared_ptr<PackedWeightArena> arena;  // holds the blocked copy, when given
  memory weights;  // the blocked copy (owns it when there is no arena)
  mutable std::mutex mu;
  // A call's memory objects and argument map, made once and re-pointed at each call's
  // operands (making them per call cost ~1.6 us, as in packed_conv.cpp); one set per
  // concurrent caller, taken from `idle` under mu and given back after the call.
  struct Bindings {
    memory src, dst, pad, bias;
    std::unordered_map<int, memory> args;
  };
  struct Prepared {
    dnnl::matmul matmul;
    memory::desc scratchpad;
    std::vector<std::unique_ptr<Bindings>> idle;  // guarded by mu
  };
  // (has bias, activation, M, threads) -> matmul; mutable: filled on first use of a shape.
  // Per thread count: oneDNN runs a primitive on the threads it was made for (packed_conv.cpp).
  using Key = std::tuple<bool, LinearActivation, int64_t, int>;
  mutable std::map<Key, std::shared_ptr<Prepared>> primitives;

  dnnl::matmul::primitive_desc describe(int64_t m, int64_t n, int64_t k, bool bias, LinearActivation act) const {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // The activation as a post-op on the accumulator, before it is stored: one pass over y
    // fewer (a GELU after each FFN product was ~3% of the encoder at one thread).
    if (act != LinearActivation::None) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f,
                         act == LinearActivation::Relu   ? dnnl::algorithm::eltwise_relu
                         : act == LinearActivation::Gelu ? dnnl::algorithm::eltwise_gelu_erf
                                                         : dnnl::algorithm::eltwise_gelu_tanh,
                         0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    memory::desc src({m, k}, Type::f32, Tag::ab);
    memory::desc dst({m, n}, Type::f32, Tag::ab);
    if (bias) {
      return {dnnl::matmul::desc(src, weights_desc, memory::desc({1, n}, Type::f32, Tag::ab), dst),
              attr, cpu_engine()};
    }
    return {dnnl::matmul::desc(src, weights_desc, dst), attr, cpu_engine()};
  }
};

PackedLinear::PackedLinear(int64_t n, int64_t k, std::unique_ptr<State> state)
    : n_(n), k_(k), state_(std::move(state)) {}
PackedLinear::~PackedLinear() = default;

uint64_t PackedLinear::packed_bytes() const { return state_->weights_desc.get_size(); }

Result<std::unique_ptr<PackedLinear>> PackedLinear::create(const TensorView& weight,
                                                           std::shared_ptr<PackedWeightArena> arena) {
  if (weight.dtype != DType::F32 || weight.sizes.rank() != 2 || !weight.is_contiguous() ||
      weight.sizes[0] == 0 || weight.sizes[1] == 0) {
    return make_error(ErrorCode::NotSupported,
                      "packed linear: the weight ({}, rank {}) is not a non-empty contiguous f32 matrix",
                      dtype_name(weight.dtype), weight.sizes.rank());
  }
  const int64_t n = weight.sizes[0], k = weight.sizes[1];
  try {
    auto state = std::make_unique<State>();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // Weights as the matmul sees them, [K, N]; stored [N, K] row-major, that is "ba".
    memory::desc plain({k, n}, Type::f32, Tag::ba);
    dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(memory::desc({kLayoutRows, k}, Type::f32, Tag::ab),
                           memory::desc({k, n}, Type::f32, Tag::any),
                           memory::desc({kLayoutRows, n}, Type::f32, Tag::ab)),
        attr, cpu_engine());
    state->weights_desc = pd.weights_desc();
    if (state->weights_desc == plain) {
      return make_error(ErrorCode::NotSupported, "packed linear: oneDNN keeps the stored layout for {} x {}", n, k);
    }
    PLANRT_ASSIGN_OR_RETURN(void* storage, packed_weight_storage(arena.get(), state->weights_desc.get_size()));
    state->weights = storage != nullptr ? memory(state->weights_desc, cpu_engine(), storage)
                                        : memory(state->weights_desc, cpu_engine());
    state->arena = std::move(arena);
    memory source(plain, cpu_engine(), weight.data);
    dnnl::stream stream(cpu_engine());
    dnnl::reorder(source, state->weights).execute(stream, source, state->weights);
    stream.wait();
    return std::unique_ptr<PackedLinear>(new PackedLinear(n, k, std::move(state)));
  } catch (const dnnl::error& e) {
    return make_error(code_of(e.status), "packed linear: oneDNN could not prepare the {} x {} weight: {}",
                      n, k, e.what());
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory, "packed linear: cannot allocate the {} x {} weight's copy", n, k);
  }
}

Status PackedLinear::run(const OpAttrs& attrs, std::span<const TensorView> inputs,
                         std::span<const TensorView> outputs) const {
  constexpr std::string_view op = "linear";
  PLANRT_RETURN_IF_ERROR(check_operands(op, inputs, outputs));
  PLANRT_RETURN_IF_ERROR(require_f32_inputs(op, inputs));
  PLANRT_ASSIGN_OR_RETURN(LinearPlan plan, plan_linear(inputs, outputs));
  PLANRT_ASSIGN_OR_RETURN(LinearActivation activation, plan_linear_activation(attrs));
  const auto [m, n, k] = plan;
  if (n != n_ || k != k_) {
    return make_error(ErrorCode::InvalidArgument, "{}: the weight is {} x {}, packed as {} x {}", op, n, k,
                      n_, k_);
  }
  if (m == 0) return {};
  const bool has_bias = inputs.size() > 2 && !inputs[2].is_none();
  try {
    std::shared_ptr<State::Prepared> prepared;
    std::unique_ptr<State::Bindings> bindings;
    {
      std::lock_guard lock(state_->mu);
      const State::Key key{has_bias, activation, m, current_num_threads()};
      auto it = state_->primitives.find(key);
      if (it != state_->primitives.end()) {
        prepared = it->second;
      } else {
        dnnl::matmul::primitive_desc pd = state_->describe(m, n, k, has_bias, activation);
        prepared = std::make_shared<State::Prepared>();
        prepared->matmul = dnnl::matmul(pd);
        prepared->scratchpad = pd.scratchpad_desc();
        if (state_->primitives.size() < kMaxShapes) state_->primitives.emplace(key, prepared);
      }
      if (!prepared->idle.empty()) {
        bindings = std::move(prepared->idle.back());
        prepared->idle.pop_back();
      }
    }
    dnnl::engine& engine = cpu_engine();
    if (bindings == nullptr) {
      bindings = std::make_unique<State::Bindings>();
      State::Bindings& b = *bindings;
      b.src = memory(memory::desc({m, k}, Type::f32, Tag::ab), engine, nullptr);
      b.dst = memory(memory::desc({m, n}, Type::f32, Tag::ab), engine, nullptr);
      b.pad = memory(prepared->scratchpad, engine, nullptr);
      b.args = {{DNNL_ARG_SRC, b.src}, {DNNL_ARG_WEIGHTS, state_->weights}, {DNNL_ARG_DST, b.dst},
                {DNNL_ARG_SCRATCHPAD, b.pad}};
      if (has_bias) {
        b.bias = memory(memory::desc({1, n}, Type::f32, Tag::ab), engine, nullptr);
        b.args.emplace(DNNL_ARG_BIAS, b.bias);
      }
    }
    thread_local std::vector<uint8_t> scratch;
    const size_t scratch_bytes = prepared->scratchpad.get_size();
    if (scratch.size() < scratch_bytes) scratch.resize(scratch_bytes);
    State::Bindings& b = *bindings;
    b.src.set_data_handle(inputs[0].data);
    b.dst.set_data_handle(outputs[0].data);
    b.pad.set_data_handle(scratch.data());
    if (has_bias) b.bias.set_data_handle(inputs[2].data);
    thread_local dnnl::stream stream(engine);  // a thread's stream serves all its calls
    prepared->matmul.execute(stream, b.args);
    stream.wait();
    std::lock_guard lock(state_->mu);
    if (prepared->idle.size() < kMaxIdleBindings) prepared->idle.push_back(std::move(bindings));
    return {};
  } catch (const dnnl::error& e) {
    // A row count oneDNN has no matmul for with this layout: the stored weight, as the
    // plain kernel takes it, still serves.
    if (e.status == dnnl_unimplemented) return linear(attrs, inputs, outputs);
    return make_error(code_of(e.status), "{}: oneDNN matmul of {} x {} x {} failed: {}", op, m, n, k, e.what());
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::OutOfMemory,
                      "{}: out of memory preparing the oneDNN matmul of {} x {} x {} (its scratchpad "
                      "or primitive)", op, m, n, k);
  }
}

}  // namespace planrt::kernels::cpu
