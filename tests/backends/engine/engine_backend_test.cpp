// The engine backend on the CPU device (issue 4, CPU lane): exact scratch per call, private
// vs pooled sizing, growth, zero-byte calls, engines without scratch, the option's three
// channels and their precedence, bad values, install refusal, trim, failed growth, and two
// threads sharing the pool. The pool is process-wide: each test trims it first and reads
// its figures relative to that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>

#include <flatbuffers/flatbuffers.h>

#include "backends/engine/execution_context.h"
#include "backends/engine/scratch_pool.h"
#include "planrt/backends/engine.h"
#include "support/engine_fixtures.h"
#include "support/program_fixtures.h"

namespace planrt {
namespace {

using fixtures::EngineFixture;
using fixtures::engine_fixture;

constexpr uint64_t kAlign = 256;
uint64_t aligned(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

std::vector<float> make_x(int64_t s, int64_t f, float phase) {
  std::vector<float> x(static_cast<size_t>(s * f));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i) + phase) * 2.0f;
  return x;
}

// One engine segment initialized through the registered backend, released on scope exit.
class EngineHandle {
 public:
  EngineHandle(const EngineFixture& f, std::vector<BackendOption> specs = {},
               std::vector<BackendOption> options = {})
      : f_(f), options_(std::move(options)) {
    backend_ = get_backend("engine");
    Result<BackendHandle> h = backend_->init(f_.blob, specs, f_.context(options_));
    status_ = h.status();
    if (h.ok()) handle_ = *h;
  }
  ~EngineHandle() {
    if (status_.ok()) backend_->destroy(handle_);
  }
  const Status& status() const { return status_; }
  engine::ExecutionContext& context() { return engine::testing::context_of(handle_); }

  // Runs at S = s; returns the output (empty on error, with `error` set).
  std::vector<float> run(int64_t s, float phase = 0.f, Status* error = nullptr) {
    std::vector<float> x = make_x(s, f_.features, phase);
    std::vector<float> y(x.size(), NAN);
    Shape shape = *Shape::from(std::vector<int64_t>{s, f_.features});
    TensorView in = TensorView::contiguous(x.data(), DType::F32, shape);
    TensorView out = TensorView::contiguous(y.data(), DType::F32, shape);
    Status st = backend_->execute(handle_, {&in, 1}, {&out, 1}, nullptr);
    if (st.ok()) st = backend_->finish(handle_);
    if (error != nullptr) *error = st;
    if (!st.ok()) return {};
    return y;
  }
  std::vector<float> expected(int64_t s, float phase = 0.f) const {
    return f_.reference(make_x(s, f_.features, phase));
  }

 private:
  EngineFixture f_;
  std::vector<BackendOption> options_;
  Backend* backend_ = nullptr;
  BackendHandle handle_ = nullptr;
  Status status_;
};

const std::vector<BackendOption> kPooled = {{std::string(kSharedScratchOption), "true"}};
const std::vector<BackendOption> kPrivate = {{std::string(kSharedScratchOption), "false"}};

EngineScratchStats stats() {
  Result<EngineScratchStats> s = engine_scratch_stats(Device::cpu());
  EXPECT_TRUE(s.ok());
  return s.ok() ? *s : EngineScratchStats{};
}

class EngineBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(register_engine_backend().ok());
    ASSERT_TRUE(set_backend_option("engine", kSharedScratchOption, "false").ok());
    ASSERT_TRUE(trim_engine_scratch_pool(Device::cpu()).ok());
  }
  void TearDown() override {
    (void)set_backend_option("engine", kSharedScratchOption, "false");
  }
};

TEST_F(EngineBackendTest, ScratchForACallIsExactAndNeverAboveTheProfileMax) {
  EngineHandle e(engine_fixture(4, 64), {}, kPrivate);
  ASSERT_TRUE(e.status().ok()) << e.status().to_string();
  engine::Engine& engine = e.context().engine();
  // Three [S, 4] f32 intermediates, at most two alive at once.
  EXPECT_EQ(engine.scratch_bytes(), 2 * aligned(64 * 4 * 4));
  uint64_t previous = 0;
  for (int64_t s : {1, 7, 16, 17, 40, 64}) {
    std::vector<int64_t> bound = {s};
    Result<uint64_t> need = engine.scratch_bytes_for(bound);
    ASSERT_TRUE(need.ok());
    EXPECT_EQ(*need, 2 * aligned(static_cast<uint64_t>(s) * 16)) << "S=" << s;
    EXPECT_LE(*need, engine.scratch_bytes());
    EXPECT_GE(*need, previous);
    previous = *need;
    EXPECT_EQ(e.run(s), e.expected(s)) << "S=" << s;
  }
}

TEST_F(EngineBackendTest, PrivateContextsCostTheSumPooledOnesTheLargest) {
  EngineScratchStats s0 = stats();
  uint64_t sum = 0, largest = 0;
  {
    EngineHandle a(engine_fixture(4, 64), {}, kPrivate), b(engine_fixture(16, 64), {}, kPrivate),
        c(engine_fixture(8, 64), {}, kPrivate);
    ASSERT_TRUE(a.status().ok() && b.status().ok() && c.status().ok());
    for (EngineHandle* h : {&a, &b, &c}) {
      sum += h->context().engine().scratch_bytes();
      largest = std::max(largest, h->context().engine().scratch_bytes());
      EXPECT_EQ(h->run(64), h->expected(64));
    }
    EXPECT_EQ(stats().private_contexts - s0.private_contexts, 3);
    EXPECT_EQ(stats().private_scratch_bytes - s0.private_scratch_bytes, sum);
    EXPECT_EQ(stats().pool_capacity_bytes, 0u);
  }
  EXPECT_EQ(stats().private_scratch_bytes, s0.private_scratch_bytes);  // freed with the contexts
  EngineHandle a(engine_fixture(4, 64), {}, kPooled), b(engine_fixture(16, 64), {}, kPooled),
      c(engine_fixture(8, 64), {}, kPooled);
  ASSERT_TRUE(a.status().ok() && b.status().ok() && c.status().ok());
  for (EngineHandle* h : {&a, &b, &c}) EXPECT_EQ(h->run(64), h->expected(64));
  EngineScratchStats s1 = stats();
  EXPECT_EQ(s1.pool_capacity_bytes, largest);  // the max, exactly (ratio 1.00)
  EXPECT_EQ(s1.pooled_contexts - s0.pooled_contexts, 3);
  EXPECT_EQ(s1.pooled_private_equivalent_bytes - s0.pooled_private_equivalent_bytes, sum);
  EXPECT_EQ(s1.private_scratch_bytes, s0.private_scratch_bytes);
}

TEST_F(EngineBackendTest, PoolGrowsOnALargerCallAndSettlesAtTheLargestCallMade) {
  EngineHandle e(engine_fixture(16, 256), {}, kPooled);
  ASSERT_TRUE(e.status().ok());
  int64_t g0 = stats().pool_growths;
  EXPECT_EQ(e.run(8), e.expected(8));
  EXPECT_EQ(stats().pool_capacity_bytes, 2 * aligned(8 * 64));
  EXPECT_EQ(stats().pool_growths - g0, 1);
  EXPECT_EQ(e.run(40), e.expected(40));
  EXPECT_EQ(stats().pool_capacity_bytes, 2 * aligned(40 * 64));
  EXPECT_EQ(stats().pool_growths - g0, 2);
  EXPECT_EQ(e.run(8, 1.f), e.expected(8, 1.f));  // smaller: no growth, no shrink
  EXPECT_EQ(stats().pool_growths - g0, 2);
  EXPECT_EQ(stats().pool_capacity_bytes, 2 * aligned(40 * 64));
  EXPECT_LT(stats().pool_capacity_bytes, e.context().engine().scratch_bytes());  // not the profile max
}

TEST_F(EngineBackendTest, ZeroByteCallsInstallNothingAndGrowNothing) {
  EngineHandle e(engine_fixture(4, 64, Device::cpu(), false, /*min_s=*/0), {}, kPooled);
  ASSERT_TRUE(e.status().ok()) << e.status().to_string();
  EngineScratchStats s0 = stats();
  EXPECT_EQ(e.run(0), std::vector<float>{});  // S = 0: an empty output, no error
  Status err;
  e.run(0, 0.f, &err);
  EXPECT_TRUE(err.ok()) << err.to_string();
  EngineScratchStats s1 = stats();
  EXPECT_EQ(s1.pool_capacity_bytes, 0u);
  EXPECT_EQ(s1.pool_growths, s0.pool_growths);
  EXPECT_EQ(s1.pooled_runs, s0.pooled_runs);  // took no lock, recorded no run
  EXPECT_EQ(e.run(3), e.expected(3));
  EXPECT_EQ(stats().pool_capacity_bytes, 2 * aligned(3 * 16));
}

TEST_F(EngineBackendTest, AnEngineNeedingNoScratchStaysOutOfThePool) {
  EngineScratchStats s0 = stats();
  EngineHandle e(engine_fixture(4, 64, Device::cpu(), /*no_scratch=*/true), {}, kPooled);
  ASSERT_TRUE(e.status().ok());
  EXPECT_EQ(e.context().engine().scratch_bytes(), 0u);
  EXPECT_EQ(e.context().strategy(), engine::ScratchStrategy::Static);
  EXPECT_EQ(e.run(9), e.expected(9));
  EngineScratchStats s1 = stats();
  EXPECT_EQ(s1.pooled_contexts, s0.pooled_contexts);
  EXPECT_EQ(s1.private_contexts - s0.private_contexts, 1);
  EXPECT_EQ(s1.pooled_runs, s0.pooled_runs);
}

TEST_F(EngineBackendTest, EachContextKeepsTheOptionItWasCreatedWith) {
  ASSERT_TRUE(set_backend_option("engine", kSharedScratchOption, "true").ok());
  EngineHandle pooled(engine_fixture(4, 64));
  ASSERT_TRUE(set_backend_option("engine", kSharedScratchOption, "false").ok());
  EngineHandle priv(engine_fixture(4, 64));
  ASSERT_TRUE(pooled.status().ok() && priv.status().ok());
  EXPECT_EQ(pooled.context().strategy(), engine::ScratchStrategy::UserManaged);
  EXPECT_EQ(priv.context().strategy(), engine::ScratchStrategy::Static);
  int64_t runs0 = stats().pooled_runs;
  EXPECT_EQ(pooled.run(5), pooled.expected(5));  // still pooled after the option went off
  EXPECT_EQ(stats().pooled_runs - runs0, 1);
  EXPECT_EQ(priv.run(5), priv.expected(5));
  EXPECT_EQ(stats().pooled_runs - runs0, 1);
}

TEST_F(EngineBackendTest, TheOptionsThreeChannelsTheLaterWinning) {
  struct Case {
    const char* process;
    const char* spec;  // nullptr: absent
    const char* load;
    engine::ScratchStrategy expected;
  };
  using S = engine::ScratchStrategy;
  for (const Case& c : {Case{"true", nullptr, nullptr, S::UserManaged},
                        Case{"true", "false", nullptr, S::Static},
                        Case{"false", "true", nullptr, S::UserManaged},
                        Case{"false", "true", "false", S::Static},
                        Case{"true", "false", "true", S::UserManaged},
                        Case{"false", nullptr, "1", S::UserManaged},
                        Case{"false", nullptr, nullptr, S::Static}}) {
    ASSERT_TRUE(set_backend_option("engine", kSharedScratchOption, c.process).ok());
    std::vector<BackendOption> spec, load;
    if (c.spec) spec.push_back({std::string(kSharedScratchOption), c.spec});
    if (c.load) load.push_back({std::string(kSharedScratchOption), c.load});
    EngineHandle e(engine_fixture(4, 64), spec, load);
    ASSERT_TRUE(e.status().ok()) << e.status().to_string();
    EXPECT_EQ(e.context().strategy(), c.expected)
        << "process " << c.process << " spec " << (c.spec ? c.spec : "-") << " load "
        << (c.load ? c.load : "-");
    EXPECT_EQ(e.run(4), e.expected(4));
  }
}

TEST_F(EngineBackendTest, BadOptionValuesAreErrorsNamingTheKey) {
  Status s = set_backend_option("engine", kSharedScratchOption, "maybe");
  EXPECT_EQ(s.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(s.message().find(std::string(kSharedScratchOption)), std::string::npos) << s.to_string();
  EXPECT_EQ(set_backend_option("engine", "no_such_option", "true").code(), ErrorCode::NotSupported);
  EXPECT_EQ(set_backend_option("no_such_backend", kSharedScratchOption, "true").code(),
            ErrorCode::NotFound);
  EngineHandle bad_spec(engine_fixture(4, 64), {{std::string(kSharedScratchOption), "yes"}});
  EXPECT_EQ(bad_spec.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(bad_spec.status().message().find(std::string(kSharedScratchOption)), std::string::npos);
  EngineHandle bad_load(engine_fixture(4, 64), {}, {{std::string(kSharedScratchOption), ""}});
  EXPECT_EQ(bad_load.status().code(), ErrorCode::InvalidArgument);
  Result<std::string> v = get_backend("engine")->get_option(kSharedScratchOption);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "false");  // the refused value changed nothing
}

TEST_F(EngineBackendTest, AnUndersizedOrMissingInstallIsRefusedAndNothingRuns) {
  EngineHandle e(engine_fixture(4, 64), {}, kPooled);
  ASSERT_TRUE(e.status().ok());
  engine::ExecutionContext& ctx = e.context();
  std::vector<float> x = make_x(10, 4, 0.f), y(x.size(), 123.f);
  Shape shape = *Shape::from(std::vector<int64_t>{10, 4});
  TensorView in = TensorView::contiguous(x.data(), DType::F32, shape);
  TensorView out = TensorView::contiguous(y.data(), DType::F32, shape);
  Result<uint64_t> need = ctx.prepare({&in, 1}, {&out, 1});
  ASSERT_TRUE(need.ok());
  std::vector<uint8_t> buffer(*need);
  Status small = ctx.install_scratch(buffer.data(), *need - 1);
  EXPECT_EQ(small.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(small.message().find(std::to_string(*need)), std::string::npos) << small.to_string();
  Status missing = ctx.enqueue({&in, 1}, {&out, 1}, nullptr);
  EXPECT_EQ(missing.code(), ErrorCode::InvalidArgument) << missing.to_string();
  EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return v == 123.f; }));  // nothing ran
  ASSERT_TRUE(ctx.prepare({&in, 1}, {&out, 1}).ok());
  ASSERT_TRUE(ctx.install_scratch(buffer.data(), buffer.size()).ok());
  ASSERT_TRUE(ctx.enqueue({&in, 1}, {&out, 1}, nullptr).ok());
  fixtures::EngineFixture f = engine_fixture(4, 64);
  EXPECT_EQ(y, f.reference(x));
}

TEST_F(EngineBackendTest, AFailedGrowthLeavesTheOldBufferInUse) {
  EngineHandle e(engine_fixture(4, 64), {}, kPooled);
  ASSERT_TRUE(e.status().ok());
  EXPECT_EQ(e.run(8), e.expected(8));
  uint64_t before = stats().pool_capacity_bytes;
  engine::testing::fail_next_growth();
  Status err;
  EXPECT_TRUE(e.run(32, 0.f, &err).empty());
  EXPECT_EQ(err.code(), ErrorCode::OutOfMemory) << err.to_string();
  EXPECT_EQ(stats().pool_capacity_bytes, before);
  EXPECT_EQ(e.run(8, 2.f), e.expected(8, 2.f));  // still runs on the old buffer
  EXPECT_EQ(e.run(32), e.expected(32));          // and grows when it can
  EXPECT_GT(stats().pool_capacity_bytes, before);
}

TEST_F(EngineBackendTest, TrimGivesTheBufferBackAndTheNextRunGrowsAgain) {
  EngineHandle e(engine_fixture(4, 64), {}, kPooled);
  ASSERT_TRUE(e.status().ok());
  EXPECT_EQ(e.run(16), e.expected(16));
  EXPECT_GT(stats().pool_capacity_bytes, 0u);
  int64_t trims = stats().pool_trims;
  ASSERT_TRUE(trim_engine_scratch_pool(Device::cpu()).ok());
  EXPECT_EQ(stats().pool_capacity_bytes, 0u);
  EXPECT_EQ(stats().pool_trims - trims, 1);
  EXPECT_EQ(e.run(16, 3.f), e.expected(16, 3.f));
  EXPECT_EQ(stats().pool_capacity_bytes, 2 * aligned(16 * 16));
}

TEST_F(EngineBackendTest, ADimOutsideTheProfileIsOutOfRange) {
  EngineHandle e(engine_fixture(4, 16), {}, kPooled);
  ASSERT_TRUE(e.status().ok());
  Status err;
  e.run(17, 0.f, &err);
  EXPECT_EQ(err.code(), ErrorCode::OutOfRange) << err.to_string();
}

TEST_F(EngineBackendTest, ABlobWhoseScratchDisagreesWithItsPlanIsRefused) {
  EngineFixture g = engine_fixture(4, 64);
  std::unique_ptr<fb::GraphT> graph(flatbuffers::GetRoot<fb::Graph>(g.blob.data())->UnPack());
  graph->scratch_bytes += 256;
  g.blob = fixtures::pack_graph(*graph);
  EngineHandle h(g, {}, kPrivate);
  EXPECT_EQ(h.status().code(), ErrorCode::InvalidProgram) << h.status().to_string();
  EXPECT_NE(h.status().message().find("scratch"), std::string::npos);
}

// A method never binds a dim outside its own bounds, and the verifier sized values only up
// to them: a file whose engine profile reached 3.5e16 made the scratch plan's strides
// overflow (UBSan; tests/fuzz/regressions/program/engine-profile-beyond-method-bounds.prog).
TEST_F(EngineBackendTest, AProfileBeyondTheMethodsBoundsIsRefused) {
  EngineFixture g = engine_fixture(4, 64);
  std::unique_ptr<fb::GraphT> graph(flatbuffers::GetRoot<fb::Graph>(g.blob.data())->UnPack());
  graph->profile[0] = fb::DimBound(0, 1, int64_t{1} << 55);
  g.blob = fixtures::pack_graph(*graph);
  EngineHandle h(g, {}, kPrivate);
  EXPECT_EQ(h.status().code(), ErrorCode::InvalidProgram) << h.status().to_string();
  EXPECT_NE(h.status().message().find("profile entry for dim 'S' [1, 36028797018963968] is outside "
                                      "the method's bounds [1, 64]"),
            std::string::npos)
      << h.status().to_string();
}

// Two threads, each with its own pooled engine of a different size, sharing the one CPU
// buffer: outputs identical to a serial run. (Mutation checked: releasing the device lock
// before the enqueue makes the two runs share the buffer unordered, and this fails.)
TEST_F(EngineBackendTest, TwoThreadsWithPooledEnginesMatchASerialRun) {
  EngineHandle a(engine_fixture(32, 512), {}, kPooled), b(engine_fixture(96, 512), {}, kPooled);
  ASSERT_TRUE(a.status().ok() && b.status().ok());
  constexpr int kRuns = 300;
  auto s_of = [](int i, int salt) { return 64 + (i * 37 + salt) % 448; };
  auto work = [&](EngineHandle& e, int salt, std::vector<std::vector<float>>& out) {
    for (int i = 0; i < kRuns; ++i) out.push_back(e.run(s_of(i, salt), 0.01f * i));
  };
  std::vector<std::vector<float>> ra, rb, sa, sb;
  std::thread ta(work, std::ref(a), 0, std::ref(ra)), tb(work, std::ref(b), 5, std::ref(rb));
  ta.join();
  tb.join();
  work(a, 0, sa);
  work(b, 5, sb);
  int mismatches = 0;
  for (int i = 0; i < kRuns; ++i) {
    mismatches += ra[static_cast<size_t>(i)] != sa[static_cast<size_t>(i)];
    mismatches += rb[static_cast<size_t>(i)] != sb[static_cast<size_t>(i)];
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(sa[7], a.expected(s_of(7, 0), 0.07f));
}

}  // namespace
}  // namespace planrt
