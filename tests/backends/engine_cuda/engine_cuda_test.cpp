// The engine backend and its shared scratch pool on a GPU (issue 4, GPU lane): concurrency
// across threads and streams, growth that does not wait for other streams, a failed growth,
// refusal under stream capture, trim, pooled beside private, and two devices. Every test
// skips without a GPU (and fails instead with PLANRT_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "backends/engine/execution_context.h"
#include "backends/engine/scratch_pool.h"
#include "planrt/backends/engine.h"
#include "support/engine_fixtures.h"
#include "support/program_fixtures.h"
#include "support/gpu.h"

namespace planrt {
namespace {

using fixtures::EngineFixture;
using fixtures::engine_fixture;

const std::vector<BackendOption> kPooled = {{std::string(kSharedScratchOption), "true"}};
const std::vector<BackendOption> kPrivate = {{std::string(kSharedScratchOption), "false"}};

std::vector<float> make_x(int64_t s, int64_t f, float phase) {
  std::vector<float> x(static_cast<size_t>(s * f));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + phase);
  return x;
}

uint64_t device_used(int device = 0) {
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device);
  size_t free_b = 0, total_b = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  cudaSetDevice(previous);
  return total_b - free_b;
}

// One engine segment on a GPU with device operands sized for its max S.
class GpuEngine {
 public:
  GpuEngine(const EngineFixture& f, std::vector<BackendOption> options) : f_(f), options_(std::move(options)) {
    backend_ = get_backend("engine");
    Result<BackendHandle> h = backend_->init(f_.blob, {}, f_.context(options_));
    status_ = h.status();
    if (h.ok()) handle_ = *h;
    cudaSetDevice(f_.device.index);
    size_t bytes = static_cast<size_t>(f_.max_s * f_.features) * sizeof(float);
    EXPECT_EQ(cudaMalloc(&x_, bytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&y_, bytes), cudaSuccess);
  }
  ~GpuEngine() {
    cudaDeviceSynchronize();
    if (status_.ok()) backend_->destroy(handle_);
    cudaFree(x_);
    cudaFree(y_);
  }
  const Status& status() const { return status_; }
  engine::ExecutionContext& context() { return engine::testing::context_of(handle_); }

  // Enqueues one run at S = s on `stream` (input uploaded on it, output copied into `out`,
  // which must stay alive until the stream is synchronized).
  Status enqueue(int64_t s, float phase, cudaStream_t stream, std::vector<float>& host_x,
                 std::vector<float>& out) {
    host_x = make_x(s, f_.features, phase);
    out.assign(host_x.size(), NAN);
    Shape shape = *Shape::from(std::vector<int64_t>{s, f_.features});
    size_t bytes = host_x.size() * sizeof(float);
    if (cudaMemcpyAsync(x_, host_x.data(), bytes, cudaMemcpyHostToDevice, stream) != cudaSuccess) {
      return Status(ErrorCode::Internal, "upload");
    }
    TensorView in = TensorView::contiguous(x_, DType::F32, shape, f_.device);
    TensorView o = TensorView::contiguous(y_, DType::F32, shape, f_.device);
    PLANRT_RETURN_IF_ERROR(backend_->execute(handle_, {&in, 1}, {&o, 1}, stream));
    if (cudaMemcpyAsync(out.data(), y_, bytes, cudaMemcpyDeviceToHost, stream) != cudaSuccess) {
      return Status(ErrorCode::Internal, "download");
    }
    return {};
  }
  // The three parts of enqueue() apart, for tests that park streams in between (a
  // pageable upload must not sit behind a parked stream).
  Status upload(int64_t s, float phase, cudaStream_t stream) {
    staged_ = make_x(s, f_.features, phase);
    if (cudaMemcpyAsync(x_, staged_.data(), staged_.size() * 4, cudaMemcpyHostToDevice, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      return Status(ErrorCode::Internal, "upload");
    }
    return {};
  }
  Status execute_only(int64_t s, cudaStream_t stream) {
    Shape shape = *Shape::from(std::vector<int64_t>{s, f_.features});
    TensorView in = TensorView::contiguous(x_, DType::F32, shape, f_.device);
    TensorView o = TensorView::contiguous(y_, DType::F32, shape, f_.device);
    return backend_->execute(handle_, {&in, 1}, {&o, 1}, stream);
  }
  Result<std::vector<float>> download(int64_t s, cudaStream_t stream) {
    std::vector<float> out(static_cast<size_t>(s * f_.features));
    if (cudaMemcpyAsync(out.data(), y_, out.size() * 4, cudaMemcpyDeviceToHost, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      return Status(ErrorCode::Internal, "download");
    }
    return out;
  }

  // One run, finished.
  Result<std::vector<float>> run(int64_t s, float phase, cudaStream_t stream) {
    std::vector<float> x, out;
    PLANRT_RETURN_IF_ERROR(enqueue(s, phase, stream, x, out));
    if (cudaStreamSynchronize(stream) != cudaSuccess) return Status(ErrorCode::Internal, "sync");
    PLANRT_RETURN_IF_ERROR(backend_->finish(handle_));
    return out;
  }
  std::vector<float> expected(int64_t s, float phase) const {
    return f_.reference(make_x(s, f_.features, phase));
  }

 private:
  EngineFixture f_;
  std::vector<BackendOption> options_;
  Backend* backend_ = nullptr;
  BackendHandle handle_ = nullptr;
  Status status_;
  void* x_ = nullptr;
  void* y_ = nullptr;
  std::vector<float> staged_;
};

double max_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(static_cast<double>(b[i])));
    if (!(d <= worst)) worst = d;  // NaN wins
  }
  return worst;
}

struct ParkedStream {
  std::atomic<bool> released{false};
  static void CUDART_CB wait(void* self) {
    auto* p = static_cast<ParkedStream*>(self);
    while (!p->released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

class EngineCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing_support::visible_gpu_count() < 1) return;
    ASSERT_TRUE(register_engine_backend().ok());
    ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
    ASSERT_TRUE(trim_engine_scratch_pool(Device::cuda(0)).ok());
  }
};

// Two threads, two streams, two pooled engines of different sizes sharing one buffer,
// 1000 runs each: outputs identical to a serial run. Its CPU twin (tests/backends/engine)
// fails when the lock is released before the enqueue; the lock-before-record mutant passes
// here (its window is too short to hit): RunsReleasedTogetherAreStillOrderedByTheHandoff
// covers that one.
TEST_F(EngineCudaTest, TwoThreadsTwoStreamsSharingOneBufferMatchASerialRun) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  GpuEngine a(engine_fixture(32, 256, Device::cuda(0)), kPooled);
  GpuEngine b(engine_fixture(96, 256, Device::cuda(0)), kPooled);
  ASSERT_TRUE(a.status().ok() && b.status().ok()) << a.status().to_string() << b.status().to_string();
  constexpr int kRuns = 1000;
  auto s_of = [](int i, int salt) { return int64_t{16} + (i * 37 + salt) % 240; };
  auto work = [&](GpuEngine& e, int salt, std::vector<std::vector<float>>& outs, Status& st) {
    cudaSetDevice(0);
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    outs.resize(kRuns);
    std::vector<std::vector<float>> xs(kRuns);
    for (int i = 0; i < kRuns && st.ok(); ++i) {
      st = e.enqueue(s_of(i, salt), 0.001f * i, stream, xs[static_cast<size_t>(i)],
                     outs[static_cast<size_t>(i)]);
      // The device input/output buffers are reused: finish each run before the next upload.
      if (st.ok() && cudaStreamSynchronize(stream) != cudaSuccess) st = Status(ErrorCode::Internal, "sync");
    }
    cudaStreamDestroy(stream);
  };
  std::vector<std::vector<float>> ra, rb, sa, sb;
  Status sta, stb, ssa, ssb;
  std::thread ta(work, std::ref(a), 0, std::ref(ra), std::ref(sta));
  std::thread tb(work, std::ref(b), 11, std::ref(rb), std::ref(stb));
  ta.join();
  tb.join();
  ASSERT_TRUE(sta.ok() && stb.ok()) << sta.to_string() << stb.to_string();
  work(a, 0, sa, ssa);
  work(b, 11, sb, ssb);
  ASSERT_TRUE(ssa.ok() && ssb.ok());
  int mismatches = 0;
  for (int i = 0; i < kRuns; ++i) {
    mismatches += ra[static_cast<size_t>(i)] != sa[static_cast<size_t>(i)];
    mismatches += rb[static_cast<size_t>(i)] != sb[static_cast<size_t>(i)];
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_LT(max_rel_error(sa[5], a.expected(s_of(5, 0), 0.005f)), 1e-6);
}

// A growth while a host function parks a stream the pool never used returns without
// waiting for that stream (the old buffer is freed stream-ordered, not by cudaFree).
TEST_F(EngineCudaTest, AGrowthDoesNotWaitForAStreamThePoolNeverUsed) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  GpuEngine e(engine_fixture(64, 4096, Device::cuda(0)), kPooled);
  ASSERT_TRUE(e.status().ok());
  cudaStream_t run_stream = nullptr, parked = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&run_stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&parked, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(e.run(64, 0.f, run_stream).ok());  // a first, small buffer
  ParkedStream park;
  ASSERT_EQ(cudaLaunchHostFunc(parked, &ParkedStream::wait, &park), cudaSuccess);
  int64_t growths = engine_scratch_stats(Device::cuda(0))->pool_growths;
  auto t0 = std::chrono::steady_clock::now();
  Result<std::vector<float>> y = e.run(4096, 1.f, run_stream);  // grows, and finishes
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  park.released = true;
  ASSERT_EQ(cudaStreamSynchronize(parked), cudaSuccess);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(engine_scratch_stats(Device::cuda(0))->pool_growths - growths, 1);
  EXPECT_LT(seconds, 1.0) << "the growing run waited for the parked stream";
  EXPECT_LT(max_rel_error(*y, e.expected(4096, 1.f)), 1e-6);
  cudaStreamDestroy(run_stream);
  cudaStreamDestroy(parked);
}

// Two pooled runs from two threads whose streams are parked while they enqueue, then
// released together: without the handoff ordering their kernels would run at once on the
// same buffer. The pool sleeps between each enqueue and its handoff record here, so a run
// that let go of the device lock before the record would hand the buffer to the other
// thread inside that window. The mutant this test is for (lock released after the enqueue,
// before the record) fails it 3 runs of 3 on an H200 with 20 of 40 outputs wrong, while the
// correct build passes 3 of 3 (bench/results/gpu_lane.jsonl).
TEST_F(EngineCudaTest, RunsReleasedTogetherAreStillOrderedByTheHandoff) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  GpuEngine a(engine_fixture(256, 4096, Device::cuda(0)), kPooled);
  GpuEngine b(engine_fixture(256, 4096, Device::cuda(0)), kPooled);
  ASSERT_TRUE(a.status().ok() && b.status().ok());
  cudaStream_t sa = nullptr, sb = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking), cudaSuccess);
  // Run both once unparked first: with lazy module loading (CUDA's default) the first
  // launch of a kernel loads its module, which waits for the context's streams, and a
  // parked stream then deadlocks it (seen: this test hung in a fresh process).
  ASSERT_TRUE(a.run(64, 0.f, sa).ok());
  ASSERT_TRUE(b.run(64, 0.f, sb).ok());
  engine::testing::set_record_delay(std::chrono::milliseconds(2));
  int wrong = 0;
  constexpr int kRounds = 20;
  for (int i = 0; i < kRounds; ++i) {
    const int64_t n = 4096 - 64 * i;
    ASSERT_TRUE(a.upload(n, 0.3f * i, sa).ok() && b.upload(n, 0.3f * i + 100.f, sb).ok());
    ParkedStream park;
    ASSERT_EQ(cudaLaunchHostFunc(sa, &ParkedStream::wait, &park), cudaSuccess);
    ASSERT_EQ(cudaLaunchHostFunc(sb, &ParkedStream::wait, &park), cudaSuccess);
    Status ra, rb;
    std::thread ta([&] { cudaSetDevice(0); ra = a.execute_only(n, sa); });
    std::this_thread::sleep_for(std::chrono::microseconds(500));  // b arrives inside a's window
    std::thread tb([&] { cudaSetDevice(0); rb = b.execute_only(n, sb); });
    ta.join();
    tb.join();
    park.released = true;
    ASSERT_TRUE(ra.ok() && rb.ok()) << ra.to_string() << rb.to_string();
    Result<std::vector<float>> ya = a.download(n, sa), yb = b.download(n, sb);
    ASSERT_TRUE(ya.ok() && yb.ok());
    wrong += max_rel_error(*ya, a.expected(n, 0.3f * i)) > 1e-6;
    wrong += max_rel_error(*yb, b.expected(n, 0.3f * i + 100.f)) > 1e-6;
  }
  engine::testing::set_record_delay(std::chrono::microseconds(0));
  EXPECT_EQ(wrong, 0) << "of " << 2 * kRounds << " outputs";
  cudaStreamDestroy(sa);
  cudaStreamDestroy(sb);
}

TEST_F(EngineCudaTest, AFailedGrowthReturnsAnErrorAndTheNextCallRunsOnTheOldBuffer) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  GpuEngine e(engine_fixture(16, 1024, Device::cuda(0)), kPooled);
  ASSERT_TRUE(e.status().ok());
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(e.run(100, 0.f, s).ok());
  uint64_t capacity = engine_scratch_stats(Device::cuda(0))->pool_capacity_bytes;
  engine::testing::fail_next_growth();
  Result<std::vector<float>> failed = e.run(1000, 0.f, s);
  EXPECT_EQ(failed.status().code(), ErrorCode::OutOfMemory) << failed.status().to_string();
  EXPECT_EQ(engine_scratch_stats(Device::cuda(0))->pool_capacity_bytes, capacity);
  Result<std::vector<float>> again = e.run(100, 2.f, s);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_LT(max_rel_error(*again, e.expected(100, 2.f)), 1e-6);
  cudaStreamDestroy(s);
}

// Refused under the global and the relaxed capture modes, before anything the capture
// cannot take: the capture is still valid afterwards.
TEST_F(EngineCudaTest, APooledRunOnACapturingStreamIsRefusedAndTheCaptureSurvives) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  GpuEngine e(engine_fixture(16, 256, Device::cuda(0)), kPooled);
  ASSERT_TRUE(e.status().ok());
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(e.run(32, 0.f, s).ok());  // the pool has a buffer and a recorded handoff
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed}) {
    ASSERT_EQ(cudaStreamBeginCapture(s, mode), cudaSuccess);
    std::vector<float> x, out;
    Status refused = e.enqueue(32, 0.f, s, x, out);
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    // The refusal came at execute, after the (captured) upload; the download never ran.
    EXPECT_EQ(refused.code(), ErrorCode::NotSupported) << refused.to_string();
    EXPECT_EQ(end, cudaSuccess) << cudaGetErrorString(end) << " (mode " << mode << ")";
    EXPECT_NE(graph, nullptr);
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
  }
  Result<std::vector<float>> after = e.run(32, 0.f, s);  // and the engine still runs
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  cudaStreamDestroy(s);
}

// Planned scratch (docs/design.md §6): the engine takes its scratch from the call (the
// Delegate's last output, a value of the method's arena), takes no pool lock, and so runs
// inside a stream capture, which a pooled run refuses; the replayed graph computes the same.
TEST_F(EngineCudaTest, APlannedEngineRunsInsideAStreamCaptureAndItsReplayIsCorrect) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  EngineFixture f = engine_fixture(16, 256, Device::cuda(0));
  std::unique_ptr<fb::GraphT> g(flatbuffers::GetRoot<fb::Graph>(f.blob.data())->UnPack());
  g->scratch_operand = true;
  const uint64_t scratch_bytes = g->scratch_bytes;
  ASSERT_GT(scratch_bytes, 0u);
  f.blob = fixtures::pack_graph(*g);
  Backend* backend = get_backend("engine");
  ASSERT_NE(backend, nullptr);
  Result<BackendHandle> h = backend->init(f.blob, {}, f.context());
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  Result<EngineScratchStats> stats = engine_scratch_stats(Device::cuda(0));
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->planned_contexts, 1);
  const int64_t s = 200;
  std::vector<float> x = make_x(s, 16, 0.5f), y(x.size(), NAN);
  void *dx = nullptr, *dy = nullptr, *scratch = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&scratch, scratch_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  Shape shape = *Shape::from(std::vector<int64_t>{s, 16});
  TensorView in = TensorView::contiguous(dx, DType::F32, shape, Device::cuda(0));
  TensorView outs[2] = {TensorView::contiguous(dy, DType::F32, shape, Device::cuda(0)),
                        TensorView::contiguous(scratch, DType::F32,
                                               *Shape::from(std::vector<int64_t>{static_cast<int64_t>(scratch_bytes / 4)}),
                                               Device::cuda(0))};
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // Without its scratch the call is refused.
  EXPECT_EQ(backend->execute(*h, {&in, 1}, {outs, 1}, stream).code(), ErrorCode::InvalidArgument);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  Status captured = backend->execute(*h, {&in, 1}, {outs, 2}, stream);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured.to_string();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_TRUE(backend->finish(*h).ok());
  ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_LE(max_rel_error(y, f.reference(x)), 1e-6);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  backend->destroy(*h);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(scratch);
}

TEST_F(EngineCudaTest, TrimReturnsTheDeviceMemory) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  GpuEngine e(engine_fixture(256, 65536, Device::cuda(0)), kPooled);  // 64 MiB per intermediate
  ASSERT_TRUE(e.status().ok());
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(e.run(8, 0.f, s).ok());  // warm the kernels and cuBLAS before measuring
  ASSERT_TRUE(trim_engine_scratch_pool(Device::cuda(0)).ok());
  uint64_t before = device_used();
  ASSERT_TRUE(e.run(65536, 0.f, s).ok());
  uint64_t grown = device_used();
  EXPECT_GE(grown - before, uint64_t{120} << 20);  // two 64 MiB intermediates
  ASSERT_TRUE(trim_engine_scratch_pool(Device::cuda(0)).ok());
  EXPECT_EQ(engine_scratch_stats(Device::cuda(0))->pool_capacity_bytes, 0u);
  uint64_t after = device_used();
  EXPECT_LE(after, before + (uint64_t{2} << 20));
  cudaStreamDestroy(s);
}

TEST_F(EngineCudaTest, PooledAndPrivateContextsInterleavedGiveIdenticalOutputs) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  GpuEngine pooled(engine_fixture(48, 512, Device::cuda(0)), kPooled);
  GpuEngine priv(engine_fixture(48, 512, Device::cuda(0)), kPrivate);
  ASSERT_TRUE(pooled.status().ok() && priv.status().ok());
  EXPECT_EQ(pooled.context().strategy(), engine::ScratchStrategy::UserManaged);
  EXPECT_EQ(priv.context().strategy(), engine::ScratchStrategy::Static);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  for (int i = 0; i < 50; ++i) {
    int64_t n = 1 + (i * 53) % 512;
    Result<std::vector<float>> a = pooled.run(n, 0.1f * i, s);
    Result<std::vector<float>> b = priv.run(n, 0.1f * i, s);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b) << "S=" << n;
    EXPECT_LT(max_rel_error(*a, pooled.expected(n, 0.1f * i)), 1e-6);
  }
  cudaStreamDestroy(s);
}

TEST_F(EngineCudaTest, AnEngineCalledWithoutAStreamFinishesBeforeReturning) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  GpuEngine e(engine_fixture(8, 64, Device::cuda(0)), kPooled);
  ASSERT_TRUE(e.status().ok());
  std::vector<float> x = make_x(20, 8, 0.f), y(x.size(), NAN);
  void *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, y.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  Shape shape = *Shape::from(std::vector<int64_t>{20, 8});
  TensorView in = TensorView::contiguous(dx, DType::F32, shape, Device::cuda(0));
  TensorView out = TensorView::contiguous(dy, DType::F32, shape, Device::cuda(0));
  Backend* b = get_backend("engine");
  EngineFixture f = engine_fixture(8, 64, Device::cuda(0));  // the blob outlives the handle
  Result<BackendHandle> h = b->init(f.blob, {}, f.context(kPooled));
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  Status st = b->execute(*h, {&in, 1}, {&out, 1}, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_LT(max_rel_error(y, engine_fixture(8, 64).reference(x)), 1e-6);
  b->destroy(*h);
  cudaFree(dx);
  cudaFree(dy);
}

// Pools are per device: a growth on one device leaves the other's untouched, and runs on
// both at once are correct. Skips on one GPU.
TEST_F(EngineCudaTest, PoolsArePerDevice) {
  PLANRT_REQUIRE_GPUS_OR_SKIP(2);
  ASSERT_TRUE(trim_engine_scratch_pool(Device::cuda(1)).ok());
  GpuEngine e0(engine_fixture(32, 2048, Device::cuda(0)), kPooled);
  GpuEngine e1(engine_fixture(32, 2048, Device::cuda(1)), kPooled);
  ASSERT_TRUE(e0.status().ok() && e1.status().ok());
  auto work = [](GpuEngine& e, int device, int64_t s, Status& st) {
    cudaSetDevice(device);
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    for (int i = 0; i < 200 && st.ok(); ++i) {
      Result<std::vector<float>> y = e.run(s - i % 7, 0.01f * i, stream);
      if (!y.ok()) st = y.status();
      else if (max_rel_error(*y, e.expected(s - i % 7, 0.01f * i)) > 1e-6) st = Status(ErrorCode::Internal, "mismatch");
    }
    cudaStreamDestroy(stream);
  };
  Status s0, s1;
  std::thread t0(work, std::ref(e0), 0, 2048, std::ref(s0)), t1(work, std::ref(e1), 1, 512, std::ref(s1));
  t0.join();
  t1.join();
  EXPECT_TRUE(s0.ok()) << s0.to_string();
  EXPECT_TRUE(s1.ok()) << s1.to_string();
  EXPECT_EQ(engine_scratch_stats(Device::cuda(0))->pool_capacity_bytes, 2 * 2048 * 32 * 4u);
  EXPECT_EQ(engine_scratch_stats(Device::cuda(1))->pool_capacity_bytes, 2 * 512 * 32 * 4u);
  // While device 0's lock is held (as by a pooled run there, a growth included), a pooled
  // run on device 1 that grows its pool completes.
  std::atomic<bool> done{false};
  Status grown;
  {
    std::unique_lock<std::mutex> held = engine::testing::hold_device_lock(Device::cuda(0));
    std::thread t([&] {
      cudaSetDevice(1);
      cudaStream_t stream = nullptr;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      Result<std::vector<float>> y = e1.run(2048, 0.5f, stream);
      grown = y.status();
      cudaStreamDestroy(stream);
      done = true;
    });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(done.load()) << "a run on cuda:1 waited for cuda:0's lock";
    held.unlock();
    t.join();
  }
  EXPECT_TRUE(grown.ok()) << grown.to_string();
  EXPECT_EQ(engine_scratch_stats(Device::cuda(1))->pool_capacity_bytes, 2 * 2048 * 32 * 4u);
  // The pool keeps its buffers until trimmed (docs/design.md §6): give both back, so that nothing
  // is left on either device when the process ends (compute-sanitizer's leak check).
  for (int d : {0, 1}) {
    EXPECT_TRUE(trim_engine_scratch_pool(Device::cuda(d)).ok());
    EXPECT_EQ(engine_scratch_stats(Device::cuda(d))->pool_capacity_bytes, 0u) << "cuda:" << d;
  }
}

}  // namespace
}  // namespace planrt
