// Loads a program, prints each method's memory estimate (known before loading), runs one
// method on inputs of ones at each dim's smallest size, and prints the outputs and what the
// run holds in memory. Every planrt call returns a Status or a Result: nothing throws.
//
//   run_program MODEL.prog [METHOD]
#include <cstdio>
#include <string>
#include <vector>

#include <planrt/backends/engine.h>
#include <planrt/runtime/program.h>
#ifdef PLANRT_HAVE_CUDA
#include <planrt/backends/cuda.h>
#include <planrt/platform/cuda.h>
#endif

namespace {

int fail(const planrt::Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

// Ones of the spec's shape, its named dims at their smallest.
planrt::Result<planrt::Tensor> ones(const planrt::TensorSpec& spec, const planrt::MethodMeta& meta) {
  std::vector<int64_t> bound;
  for (const planrt::DimSpec& d : meta.dims) bound.push_back(d.min);
  PLANRT_ASSIGN_OR_RETURN(planrt::Shape shape, planrt::concrete_shape(spec.shape, bound, meta.dims));
  PLANRT_ASSIGN_OR_RETURN(planrt::Tensor t, planrt::Tensor::zeros(spec.dtype, shape));
  if (spec.dtype == planrt::DType::F32) {
    for (float& v : t.values<float>()) v = 1.0f;
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.prog [METHOD]\n", argv[0]);
    return 2;
  }
  if (planrt::Status s = planrt::register_engine_backend(); !s.ok()) return fail(s);
#ifdef PLANRT_HAVE_CUDA
  if (planrt::Status s = planrt::register_cuda_backend(); !s.ok()) return fail(s);
#endif
  planrt::Result<planrt::Program> program = planrt::Program::load(argv[1]);
  if (!program.ok()) return fail(program.status());

  for (const std::string& name : program->method_names()) {
    planrt::Result<planrt::MethodMeta> meta = program->method_meta(name);
    if (!meta.ok()) return fail(meta.status());
    for (const planrt::MemoryEstimate& e : meta->memory) {
      std::printf("estimate %s on %s: planned %llu B, weights %llu B, engine scratch %llu B\n",
                  name.c_str(), planrt::to_string(e.device).c_str(),
                  static_cast<unsigned long long>(e.planned_bytes),
                  static_cast<unsigned long long>(e.weights_bytes),
                  static_cast<unsigned long long>(e.engine_scratch_bytes));
    }
  }

  const std::string name = argc > 2 ? argv[2] : program->method_names().front();
  planrt::Result<planrt::Method> method = program->load_method(name);
  if (!method.ok()) return fail(method.status());
  const planrt::MethodMeta& meta = method->meta();
  std::vector<planrt::Tensor> inputs;
  std::vector<planrt::TensorView> views;
  for (const planrt::TensorSpec& spec : meta.inputs) {
    planrt::Result<planrt::Tensor> t = ones(spec, meta);
    if (!t.ok()) return fail(t.status());
    inputs.push_back(std::move(t).value());
    views.push_back(inputs.back().view());
  }
  planrt::Result<std::vector<planrt::Tensor>> outputs = method->execute(views);
  if (!outputs.ok()) return fail(outputs.status());
  for (size_t i = 0; i < outputs->size(); ++i) {
    const planrt::Tensor& t = (*outputs)[i];
    double sum = 0;
    if (t.dtype() == planrt::DType::F32) {
      for (float v : t.values<float>()) sum += v;
    }
    std::printf("output %s: %s %s, sum %.6g\n", meta.outputs[i].name.c_str(),
                std::string(planrt::dtype_name(t.dtype())).c_str(), t.shape().to_string().c_str(), sum);
  }

  // The memory report: the plan's figures, then what the pools hold after the run.
  for (const planrt::MemoryEstimate& e : meta.memory) {
    std::printf("memory on %s: weights %llu B, planned %llu B\n", planrt::to_string(e.device).c_str(),
                static_cast<unsigned long long>(e.weights_bytes),
                static_cast<unsigned long long>(method->shares_memory_arenas() && e.device.is_cpu()
                                                    ? program->shared_host_arena_bytes()
                                                    : e.planned_bytes));
    planrt::Result<planrt::EngineScratchStats> scratch = planrt::engine_scratch_stats(e.device);
    if (scratch.ok()) {
      std::printf("  engine scratch: %lld private contexts holding %llu B, pool %llu B\n",
                  static_cast<long long>(scratch->private_contexts),
                  static_cast<unsigned long long>(scratch->private_scratch_bytes),
                  static_cast<unsigned long long>(scratch->pool_capacity_bytes));
    }
#ifdef PLANRT_HAVE_CUDA
    if (!e.device.is_cpu()) {
      planrt::Result<planrt::CudaPoolStats> pool = planrt::cuda_pool_stats(e.device);
      if (pool.ok()) {
        std::printf("  warm pool: %llu B reserved, %llu B highest in use\n",
                    static_cast<unsigned long long>(pool->reserved_bytes),
                    static_cast<unsigned long long>(pool->used_high_bytes));
      }
    }
#endif
  }
  return 0;
}
