// What every cuDNN execution plan of planrt shares (cudnn_conv_plan.h, cudnn_attention_plan.h):
// backend descriptors owned RAII, tensors described by dims and strides, cuDNN's ranked engine
// configs, the first of them that finalizes into a plan, and a per-handle cache of plans.
//
// Ownership: a BackendDescriptor owns one cuDNN descriptor and destroys it with itself
// (move-only). Plans are bound to the handle they were made with; the handle's caches own
// them and are destroyed before the handle (cudnn_library.h). Thread safety: a PlanCache is
// safe from any thread; everything else here is used by one thread at a time.
#pragma once

#include <cudnn.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "planrt/core/result.h"

namespace planrt::kernels::cuda {

struct CudnnLibrary;

// Every operand is at least 16-byte aligned where a plan is made for it: planned offsets,
// pool blocks and the padded copy at a convolution workspace's start all are, and attention
// takes cuDNN only for operands that are (attention.cpp).
inline constexpr int64_t kCudnnOperandAlignment = 16;

// `s` as a Status: ok, or the error of `op` doing `what` with cuDNN's message. OutOfMemory
// for a failed allocation, NotSupported for a bad parameter or what cuDNN cannot take,
// Internal otherwise.
Status cudnn_backend_status(const CudnnLibrary& lib, cudnnStatus_t s, std::string_view op, std::string_view what);

// A cuDNN backend descriptor, destroyed with its owner. Move-only.
class BackendDescriptor {
 public:
  static Result<BackendDescriptor> make(const CudnnLibrary& lib, cudnnBackendDescriptorType_t type,
                                        std::string_view op, std::string_view what);
  BackendDescriptor() = default;
  BackendDescriptor(BackendDescriptor&& o) noexcept;
  BackendDescriptor& operator=(BackendDescriptor&& o) noexcept;
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;
  ~BackendDescriptor() { reset(); }

  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t release() { return std::exchange(d_, nullptr); }

  template <typename T>
  Status set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, int64_t count,
             std::string_view what) {
    return set_raw(name, type, count, values, what);
  }
  // One other descriptor as the attribute's value.
  Status set_descriptor(cudnnBackendAttributeName_t name, const BackendDescriptor& value, std::string_view what) {
    cudnnBackendDescriptor_t d = value.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &d, 1, what);
  }
  Status finalize(std::string_view what);

 private:
  Status set_raw(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                 const void* values, std::string_view what);
  void reset();
  const CudnnLibrary* lib_ = nullptr;
  std::string_view op_;  // a string literal: the op whose plan this is, for errors
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A tensor of `dims` laid out by `strides` (elements). by_value: a host scalar passed in the
// variant pack (a scale), not device memory.
struct BackendTensorSpec {
  int64_t uid = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::array<int64_t, 4> dims{};
  std::array<int64_t, 4> strides{};
  bool by_value = false;
};
Result<BackendDescriptor> backend_tensor(const CudnnLibrary& lib, std::string_view op, const BackendTensorSpec& spec);

// A finalized operation graph of `ops` on `handle`.
Result<BackendDescriptor> backend_graph(const CudnnLibrary& lib, cudnnHandle_t handle, std::string_view op,
                                        std::span<const BackendDescriptor* const> ops);

// The engine configs cuDNN's heuristics rank for `graph` in `mode`, best first.
Result<std::vector<BackendDescriptor>> ranked_engine_configs(const CudnnLibrary& lib, cudnnBackendDescriptor_t graph,
                                                             std::string_view op, cudnnBackendHeurMode_t mode);

// The behaviour and numerical notes of the engine behind `config`; false when they cannot
// be read (the config is then not used).
struct EngineNotes {
  std::vector<cudnnBackendNumericalNote_t> numerical;
  std::vector<cudnnBackendBehaviorNote_t> behavior;
  bool has(cudnnBackendNumericalNote_t n) const;
  bool has(cudnnBackendBehaviorNote_t n) const;
};
bool read_engine_notes(const CudnnLibrary& lib, cudnnBackendDescriptor_t config, std::string_view op,
                       EngineNotes& notes);

// The execution plan of `config` on `handle` and its workspace size, or an error when the
// engine cannot take the graph (the caller then tries the next config).
struct FinalizedPlan {
  BackendDescriptor plan;
  int64_t workspace_bytes = 0;
};
Result<FinalizedPlan> finalize_plan(const CudnnLibrary& lib, cudnnHandle_t handle, cudnnBackendDescriptor_t config,
                                    std::string_view op);

// The first engine config that `suits` and finalizes into a plan needing at most
// `workspace_budget` bytes, in cuDNN's ranking (mode A) and then its fallback list (which holds
// the engines that need little or no workspace). Each list is walked `passes` times, pass p
// asking suits(config, p): a later pass can admit what an earlier one left for last (engines
// compiled at run time). When none is found: the first failure that was not a refusal (out of
// memory, a failed compilation: worth trying again later), else NotSupported; `seen` says
// why, for the caller's message.
struct PlanSearch {
  int64_t ranked = 0;          // configs cuDNN ranked
  int64_t smallest_need = -1;  // the least workspace of a plan over budget, or -1
  std::string first_failure;   // why the first config that suited did not finalize
  Status other_failure;        // the first failure that was not a refusal (out of memory, ...)
};
Result<FinalizedPlan> search_plan(const CudnnLibrary& lib, cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
                                  std::string_view op, uint64_t workspace_budget, int passes,
                                  const std::function<bool(cudnnBackendDescriptor_t config, int pass)>& suits,
                                  PlanSearch& seen);

// Executes `plan` on `handle` with the operands `uids[i]` at `pointers[i]`.
Status execute_plan(const CudnnLibrary& lib, cudnnHandle_t handle, cudnnBackendDescriptor_t plan, std::string_view op,
                    std::span<const int64_t> uids, std::span<void* const> pointers, void* workspace);

// A handle's plans of one kind, by key. Plans are never evicted: a method's shapes are
// bounded by its dims, and each plan is a few KiB of host memory. A key cuDNN cannot plan
// (NotSupported) is remembered too, so a caller with a fallback asks cuDNN once per shape;
// other failures (out of memory) are not, and the next call tries again.
// Plan::create(const CudnnLibrary&, cudnnHandle_t, const Key&) makes a plan.
template <typename Key, typename Plan>
class PlanCache {
 public:
  // What is known of `key` without making anything: its plan, or that cuDNN refused it, or
  // neither (not asked yet, or an earlier failure that was not a refusal).
  struct Known {
    const Plan* plan = nullptr;
    bool refused = false;
  };
  Known find(const Key& key) const {
    std::lock_guard lock(mu_);
    if (auto it = plans_.find(key); it != plans_.end()) return {it->second.get(), false};
    return {nullptr, refused_.contains(key)};
  }
  // The plan for `key`, made on first use.
  Result<const Plan*> get(const CudnnLibrary& lib, cudnnHandle_t handle, const Key& key) {
    std::lock_guard lock(mu_);
    if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
    if (auto it = refused_.find(key); it != refused_.end()) return it->second;
    Result<std::unique_ptr<Plan>> plan = Plan::create(lib, handle, key);
    if (!plan.ok()) {
      if (plan.status().code() == ErrorCode::NotSupported) refused_.emplace(key, plan.status());
      return plan.status();
    }
    return plans_.emplace(key, std::move(plan).value()).first->second.get();
  }
  // Plans made (refused keys not counted).
  size_t size() const {
    std::lock_guard lock(mu_);
    return plans_.size();
  }
  size_t refused() const {
    std::lock_guard lock(mu_);
    return refused_.size();
  }

 private:
  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::map<Key, Status> refused_;
};

}  // namespace planrt::kernels::cuda
