// conv2d, the pools and the window arithmetic on the host, against direct references in
// double: the plain kernel (im2col + product in the planned workspace) and oneDNN's prepared
// convolution (kernels/cpu/packed_conv.h), over strides, asymmetric pads, dilations, groups
// (depthwise included), bias and ReLU; and every refusal.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <limits>
#include <chrono>
#include <thread>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/packed_conv.h"
#include "kernels/cpu/threading.h"
#include "kernels/op_plans.h"
#include "kernels/workspace.h"

namespace planrt::kernels {
namespace {

using testing::HostTensor;
using testing::IsError;
using testing::run_op;

struct ConvCase {
  int64_t n, c, h, w, k, kh, kw;
  int64_t stride_h, stride_w;
  std::vector<int64_t> pads;  // top, left, bottom, right
  int64_t dil_h, dil_w, groups;
  bool bias, relu;
};

OpAttrs conv_attrs(const ConvCase& t) {
  OpAttrs a;
  a.set("strides", std::vector<int64_t>{t.stride_h, t.stride_w});
  a.set("pads", t.pads);
  a.set("dilations", std::vector<int64_t>{t.dil_h, t.dil_w});
  a.set("groups", t.groups);
  if (t.relu) a.set("activation", std::string("relu"));
  return a;
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d) {
  return (in + pb + pe - d * (k - 1) - 1) / s + 1;
}

std::vector<double> conv_reference(const ConvCase& t, const HostTensor& x, const HostTensor& w, const HostTensor* b) {
  const int64_t oh = out_size(t.h, t.kh, t.stride_h, t.pads[0], t.pads[2], t.dil_h);
  const int64_t ow = out_size(t.w, t.kw, t.stride_w, t.pads[1], t.pads[3], t.dil_w);
  const int64_t cg = t.c / t.groups, kg = t.k / t.groups;
  std::vector<double> y(static_cast<size_t>(t.n * t.k * oh * ow));
  for (int64_t n = 0; n < t.n; ++n) {
    for (int64_t k = 0; k < t.k; ++k) {
      const int64_t g = k / kg;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = b != nullptr ? b->at(k) : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci) {
            for (int64_t r = 0; r < t.kh; ++r) {
              for (int64_t s = 0; s < t.kw; ++s) {
                const int64_t iy = oy * t.stride_h - t.pads[0] + r * t.dil_h;
                const int64_t ix = ox * t.stride_w - t.pads[1] + s * t.dil_w;
                if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                sum += x.at(((n * t.c + g * cg + ci) * t.h + iy) * t.w + ix) *
                       w.at(((k * cg + ci) * t.kh + r) * t.kw + s);
              }
            }
          }
          if (t.relu && sum < 0) sum = 0;
          y[static_cast<size_t>(((n * t.k + k) * oh + oy) * ow + ox)] = sum;
        }
      }
    }
  }
  return y;
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {1, 3, 16, 16, 8, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, true, false},
      {2, 8, 15, 13, 16, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 1, true, true},
      {3, 16, 8, 8, 32, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, false, true},   // pointwise: no im2col
      {1, 16, 9, 9, 8, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, true, false},   // strided 1x1
      {2, 12, 11, 10, 12, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 12, true, true},  // depthwise
      {1, 12, 11, 10, 24, 3, 3, 2, 1, {1, 0, 2, 1}, 1, 1, 3, true, false},  // groups, asymmetric
      {1, 4, 12, 12, 6, 3, 2, 1, 2, {2, 1, 2, 0}, 2, 3, 1, false, false},   // dilations
      {2, 3, 20, 20, 8, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, 1, true, true},     // a stem
  };
  return cases;
}

struct ConvOperands {
  HostTensor x, w, b, y, workspace;
};

ConvOperands make_operands(const ConvCase& t, uint32_t seed) {
  const int64_t oh = out_size(t.h, t.kh, t.stride_h, t.pads[0], t.pads[2], t.dil_h);
  const int64_t ow = out_size(t.w, t.kw, t.stride_w, t.pads[1], t.pads[3], t.dil_w);
  Conv2dPlan plan;
  plan.c = t.c;
  plan.h = t.h;
  plan.w = t.w;
  plan.k = t.k;
  plan.oh = oh;
  plan.ow = ow;
  plan.groups = t.groups;
  plan.window = {t.kh, t.kw, t.stride_h, t.stride_w, t.pads[0], t.pads[1], t.pads[2], t.pads[3], t.dil_h, t.dil_w, false};
  const uint64_t per_image = *conv2d_host_workspace_bytes_per_image(plan);
  return {HostTensor::random({t.n, t.c, t.h, t.w}, seed), HostTensor::random({t.k, t.c / t.groups, t.kh, t.kw}, seed + 1),
          HostTensor::random({t.k}, seed + 2), HostTensor(DType::F32, {t.n, t.k, oh, ow}),
          HostTensor(DType::F32, {t.n, static_cast<int64_t>((per_image + 3) / 4)})};
}

std::vector<TensorView> conv_inputs(const ConvCase& t, const ConvOperands& o) {
  std::vector<TensorView> in = {o.x.view(), o.w.view()};
  if (t.bias) in.push_back(o.b.view());
  return in;
}

TEST(Conv2d, ThePlainKernelMatchesADirectConvolution) {
  uint32_t seed = 10;
  for (const ConvCase& t : conv_cases()) {
    ConvOperands o = make_operands(t, seed += 3);
    Status s = run_op("conv2d", conv_attrs(t), conv_inputs(t, o), {o.y.view(), o.workspace.view()});
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_LT(testing::relative_error(o.y, conv_reference(t, o.x, o.w, t.bias ? &o.b : nullptr)), 1e-6)
        << "case c " << t.c << " k " << t.k << " groups " << t.groups;
  }
}

TEST(Conv2d, ThePreparedConvolutionMatchesAtEveryBatchAndFallsBackWithoutRoom) {
  uint32_t seed = 50;
  for (const ConvCase& t : conv_cases()) {
    ConvOperands o = make_operands(t, seed += 3);
    std::vector<TensorView> in = conv_inputs(t, o);
    const TensorView outs1[] = {o.y.view()};
    Result<Conv2dPlan> plan = plan_conv2d(conv_attrs(t), in, outs1);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    Result<std::unique_ptr<cpu::PackedConv>> packed = cpu::PackedConv::create(conv_attrs(t), *plan, o.w.view());
    ASSERT_TRUE(packed.ok()) << packed.status().to_string();
    EXPECT_GE((*packed)->packed_bytes(), static_cast<uint64_t>(o.w.numel()) * sizeof(float));
    const std::vector<double> want = conv_reference(t, o.x, o.w, t.bias ? &o.b : nullptr);
    const TensorView outs[] = {o.y.view(), o.workspace.view()};
    Status s = (*packed)->run(in, outs);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_LT(testing::relative_error(o.y, want), 1e-6) << "c " << t.c << " k " << t.k << " groups " << t.groups;
    // Another batch size than the one prepared, then a workspace too small for oneDNN's
    // copies: the plain kernel runs (the same numbers).
    ConvCase other = t;
    other.n = t.n + 2;
    ConvOperands o2 = make_operands(other, seed + 100);
    std::vector<TensorView> in2 = conv_inputs(other, o2);
    in2[1] = o.w.view();
    if (t.bias) in2[2] = o.b.view();
    const std::vector<double> want2 = conv_reference(other, o2.x, o.w, t.bias ? &o.b : nullptr);
    const TensorView outs2[] = {o2.y.view(), o2.workspace.view()};
    ASSERT_TRUE((*packed)->run(in2, outs2).ok());
    EXPECT_LT(testing::relative_error(o2.y, want2), 1e-6);
    const uint64_t im2col = conv2d_im2col_bytes(*plan);
    HostTensor small(DType::F32, {std::max<int64_t>(1, static_cast<int64_t>(im2col / 4))});
    HostTensor y3(DType::F32, o2.y.shape());
    const TensorView outs3[] = {y3.view(), small.view()};
    s = (*packed)->run(in2, outs3);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_LT(testing::relative_error(y3, want2), 1e-6);
  }
}

// One prepared convolution called from several threads at once, each with its own operands
// and batch size, many times: each call binds its own memory objects (packed_conv.h keeps
// idle sets for reuse), so every result is its own input's (and the sanitizer lanes see no
// race on the kept sets).
TEST(Conv2d, ThePreparedConvolutionServesConcurrentCallers) {
  const ConvCase base{1, 8, 12, 12, 8, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, true, true};
  ConvOperands o = make_operands(base, 900);
  std::vector<TensorView> in = conv_inputs(base, o);
  const TensorView outs1[] = {o.y.view()};
  Result<Conv2dPlan> plan = plan_conv2d(conv_attrs(base), in, outs1);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  Result<std::unique_ptr<cpu::PackedConv>> packed = cpu::PackedConv::create(conv_attrs(base), *plan, o.w.view());
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  constexpr int kThreads = 4;
  std::vector<double> errors(kThreads, 1.0);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ConvCase mine = base;
      mine.n = 1 + t % 2;  // two batch sizes: two prepared convolutions, each shared by two threads
      ConvOperands m = make_operands(mine, 1000 + 10 * static_cast<uint32_t>(t));
      std::vector<TensorView> mine_in = conv_inputs(mine, m);
      mine_in[1] = o.w.view();
      mine_in[2] = o.b.view();
      const std::vector<double> want = conv_reference(mine, m.x, o.w, &o.b);
      const TensorView outs[] = {m.y.view(), m.workspace.view()};
      double worst = 0;
      for (int r = 0; r < 50; ++r) {
        std::fill_n(m.y.f(), m.y.numel(), std::nanf(""));
        Status s = (*packed)->run(mine_in, outs);
        if (!s.ok()) {
          failures[static_cast<size_t>(t)] = s.to_string();
          return;
        }
        worst = std::max(worst, testing::relative_error(m.y, want));
      }
      errors[static_cast<size_t>(t)] = worst;
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[static_cast<size_t>(t)], "") << "thread " << t;
    EXPECT_LT(errors[static_cast<size_t>(t)], 1e-6) << "thread " << t;
  }
}

// A 3x3 convolution of stride 1 also packs oneDNN's Winograd layouts (batch 1 and the
// largest batch); the first call at each batch times the candidates and keeps the faster.
// Whatever is kept, every call at every batch matches the float64 reference to within
// Winograd's rounding (F(4x4, 3x3) measured at ~2e-6 on such data, the direct ~5e-7), and
// the layouts are counted in packed_bytes().
TEST(Conv2d, TheWinogradCandidatesMatchAtEveryBatchAndAreCounted) {
  const ConvCase base{1, 64, 28, 28, 64, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, true, true};
  ConvOperands o = make_operands(base, 77);
  std::vector<TensorView> in = conv_inputs(base, o);
  const TensorView outs1[] = {o.y.view()};
  Result<Conv2dPlan> plan = plan_conv2d(conv_attrs(base), in, outs1);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  constexpr int64_t kMaxBatch = 8;
  auto packed = cpu::PackedConv::create(conv_attrs(base), *plan, o.w.view(), nullptr, kMaxBatch);
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  if ((*packed)->winograd_layouts() == 0) GTEST_SKIP() << "oneDNN offers no Winograd convolution on this CPU";
  EXPECT_GT((*packed)->packed_bytes(), static_cast<uint64_t>(o.w.numel()) * sizeof(float));
  for (int64_t n : {int64_t{1}, int64_t{3}, kMaxBatch}) {
    ConvCase mine = base;
    mine.n = n;
    ConvOperands m = make_operands(mine, 300 + static_cast<uint32_t>(n));
    std::vector<TensorView> mine_in = conv_inputs(mine, m);
    mine_in[1] = o.w.view();
    mine_in[2] = o.b.view();
    const std::vector<double> want = conv_reference(mine, m.x, o.w, &o.b);
    const TensorView outs[] = {m.y.view(), m.workspace.view()};
    for (int call = 0; call < 3; ++call) {  // the deciding call, then the kept choice
      std::fill_n(m.y.f(), m.y.numel(), std::nanf(""));
      Status s = (*packed)->run(mine_in, outs);
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_LT(testing::relative_error(m.y, want), 1e-5) << "batch " << n << " call " << call;
    }
  }
}

TEST(Conv2d, ThePreparedConvolutionRefusesOperandsItWasNotPreparedFor) {
  const ConvCase t = conv_cases()[1];
  ConvOperands o = make_operands(t, 7);
  std::vector<TensorView> in = conv_inputs(t, o);
  const TensorView outs1[] = {o.y.view()};
  Result<Conv2dPlan> plan = plan_conv2d(conv_attrs(t), in, outs1);
  ASSERT_TRUE(plan.ok());
  auto packed = cpu::PackedConv::create(conv_attrs(t), *plan, o.w.view());
  ASSERT_TRUE(packed.ok());
  const TensorView outs[] = {o.y.view(), o.workspace.view()};
  std::vector<TensorView> no_bias = {in[0], in[1]};
  EXPECT_TRUE(IsError((*packed)->run(no_bias, outs), ErrorCode::InvalidArgument, {"prepared convolution"}));
  HostTensor other_x = HostTensor::random({t.n, t.c, t.h + 1, t.w}, 3);
  std::vector<TensorView> wrong = {other_x.view(), in[1], in[2]};
  EXPECT_TRUE(IsError((*packed)->run(wrong, outs), ErrorCode::InvalidArgument, {"prepared convolution"}));
  HostTensor bad_weight = HostTensor::random({t.k, t.c, 5, 5}, 4);
  EXPECT_TRUE(IsError(cpu::PackedConv::create(conv_attrs(t), *plan, bad_weight.view()).status(), ErrorCode::NotSupported));
}

// CPU time (ns) of each task of this process but the calling one, from
// /proc/self/task/*/schedstat; empty when the kernel does not provide it.
std::map<std::string, uint64_t> other_tasks_cpu_ns() {
  std::map<std::string, uint64_t> out;
  const std::string self = std::to_string(static_cast<long>(syscall(SYS_gettid)));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const std::string tid = entry.path().filename().string();
    if (tid == self) continue;
    std::ifstream in(entry.path() / "schedstat");
    uint64_t ns = 0;
    if (in >> ns) out[tid] = ns;
  }
  return out;
}

uint64_t own_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// CPU time the process's other tasks (OpenMP's workers) and the calling thread spend while
// `calls` runs of a prepared t-convolution go on under `threads`, after one untimed run that
// makes the primitive. `warm_two` first runs it at two threads, which starts OpenMP's worker.
// The output is checked against the reference.
struct CpuSplit {
  uint64_t others = 0, own = 0;
};
CpuSplit cpu_split_of_prepared_runs(const ConvCase& t, int threads, int calls, bool warm_two) {
  CpuSplit split;
  ConvOperands o = make_operands(t, 11);
  std::vector<TensorView> in = conv_inputs(t, o);
  const TensorView outs1[] = {o.y.view()};
  Result<Conv2dPlan> plan = plan_conv2d(conv_attrs(t), in, outs1);
  EXPECT_TRUE(plan.ok());
  if (!plan.ok()) return split;
  auto packed = cpu::PackedConv::create(conv_attrs(t), *plan, o.w.view());
  EXPECT_TRUE(packed.ok()) << packed.status().to_string();
  if (!packed.ok()) return split;
  const TensorView outs[] = {o.y.view(), o.workspace.view()};
  if (warm_two) {
    cpu::ThreadCountScope two(2);
    EXPECT_TRUE((*packed)->run(in, outs).ok());
  }
  cpu::ThreadCountScope scope(threads);
  EXPECT_TRUE((*packed)->run(in, outs).ok());
  // libgomp's worker spins after the untimed runs before it sleeps (measured here: ~9.5 ms
  // of CPU, a quarter of 5000 small calls on this machine; none with GOMP_SPINCOUNT=0): let
  // it sleep first, so that what is counted is work done during the timed calls.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto before = other_tasks_cpu_ns();
  const uint64_t own_before = own_cpu_ns();
  for (int i = 0; i < calls; ++i) EXPECT_TRUE((*packed)->run(in, outs).ok());
  split.own = own_cpu_ns() - own_before;
  for (const auto& [tid, ns] : other_tasks_cpu_ns()) {
    auto it = before.find(tid);
    split.others += ns - (it == before.end() ? 0 : std::min(ns, it->second));
  }
  std::vector<double> want = conv_reference(t, o.x, o.w, &o.b);
  EXPECT_LT(testing::relative_error(o.y, want), 1e-5);
  return split;
}

// oneDNN runs a primitive on the thread count it was made with, whatever OpenMP's setting at
// the call: a convolution made at load under the process default ran on two cores in a
// one-count method. At count 1 the other tasks of the process (OpenMP's workers, started by a
// count-2 call first) must stay all but idle while the caller convolves: 100 calls (~100 ms),
// long enough that the worker's spinning after the two-thread call (libgomp spins a few ms
// before it sleeps) stays well under the bound (at 20 calls it reached 0.27).
TEST(Conv2d, ThePreparedConvolutionKeepsToTheCallersCount) {
  if (cpu::available_cpus() < 2) GTEST_SKIP() << "one CPU: every count is 1";
  const ConvCase t{1, 64, 56, 56, 64, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, true, true};
  const CpuSplit split = cpu_split_of_prepared_runs(t, 1, 100, true);
  EXPECT_LT(static_cast<double>(split.others), 0.25 * static_cast<double>(split.own))
      << "other tasks used " << split.others << " ns of CPU while the count-1 caller used " << split.own;
}

// A convolution of ~50K multiply-adds costs less than waking a second thread (threading.h,
// packed_conv.cpp): a run allowed two threads keeps it on the calling one (before, each call
// split it, and the worker used about as much CPU as the caller).
TEST(Conv2d, ASmallPreparedConvolutionStaysOnTheCallingThread) {
  if (cpu::available_cpus() < 2) GTEST_SKIP() << "one CPU: every count is 1";
  const ConvCase t{1, 16, 14, 14, 16, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, true, true};
  const CpuSplit split = cpu_split_of_prepared_runs(t, 2, 5000, false);
  EXPECT_LT(static_cast<double>(split.others), 0.25 * static_cast<double>(split.own))
      << "other tasks used " << split.others << " ns of CPU while the caller used " << split.own;
}

TEST(Conv2d, RefusesBadOperandsAndAttributesNamingThem) {
  const ConvCase t = conv_cases()[0];
  ConvOperands o = make_operands(t, 3);
  auto run = [&](const OpAttrs& a, std::vector<TensorView> in, std::vector<TensorView> out) {
    return run_op("conv2d", a, std::move(in), std::move(out));
  };
  const std::vector<TensorView> in = conv_inputs(t, o);
  // The workspace the plain kernel needs is missing or short.
  EXPECT_TRUE(IsError(run(conv_attrs(t), in, {o.y.view()}), ErrorCode::InvalidArgument, {"workspace"}));
  HostTensor tiny(DType::F32, {4});
  EXPECT_TRUE(IsError(run(conv_attrs(t), in, {o.y.view(), tiny.view()}), ErrorCode::InvalidArgument, {"workspace"}));
  // groups that do not divide the channels; a weight of the wrong rank; a bias of the wrong size.
  OpAttrs g = conv_attrs(t);
  g.set("groups", int64_t{2});
  EXPECT_TRUE(IsError(run(g, in, {o.y.view(), o.workspace.view()}), ErrorCode::InvalidArgument, {"groups"}));
  HostTensor w3 = HostTensor::random({8, 3, 3}, 1);
  EXPECT_TRUE(IsError(run(conv_attrs(t), {in[0], w3.view()}, {o.y.view(), o.workspace.view()}),
                      ErrorCode::InvalidArgument, {"weight"}));
  HostTensor b5 = HostTensor::random({5}, 1);
  EXPECT_TRUE(IsError(run(conv_attrs(t), {in[0], in[1], b5.view()}, {o.y.view(), o.workspace.view()}),
                      ErrorCode::InvalidArgument, {"bias"}));
  // Attributes: pads of the wrong length, a zero stride, an unknown activation, a wrong output.
  OpAttrs p = conv_attrs(t);
  p.set("pads", std::vector<int64_t>{1, 1});
  EXPECT_TRUE(IsError(run(p, in, {o.y.view(), o.workspace.view()}), ErrorCode::InvalidArgument, {"pads"}));
  OpAttrs s = conv_attrs(t);
  s.set("strides", std::vector<int64_t>{0, 1});
  EXPECT_TRUE(IsError(run(s, in, {o.y.view(), o.workspace.view()}), ErrorCode::InvalidArgument, {"strides"}));
  OpAttrs act = conv_attrs(t);
  act.set("activation", std::string("tanh"));
  EXPECT_TRUE(IsError(run(act, in, {o.y.view(), o.workspace.view()}), ErrorCode::InvalidArgument, {"activation"}));
  HostTensor wrong_y(DType::F32, {1, 8, 15, 16});
  EXPECT_TRUE(IsError(run(conv_attrs(t), in, {wrong_y.view(), o.workspace.view()}), ErrorCode::InvalidArgument, {"output"}));
  HostTensor x3 = HostTensor::random({3, 16, 16}, 2);
  EXPECT_TRUE(IsError(run(conv_attrs(t), {x3.view(), in[1]}, {o.y.view(), o.workspace.view()}), ErrorCode::InvalidArgument));
  // A kernel larger than the padded image.
  HostTensor big_w = HostTensor::random({8, 3, 19, 3}, 5);
  EXPECT_TRUE(IsError(run(conv_attrs(t), {in[0], big_w.view()}, {o.y.view(), o.workspace.view()}),
                      ErrorCode::InvalidArgument, {"does not fit"}));
}

TEST(WindowOutputSize, FloorCeilAndTheLastWindowInThePadding) {
  EXPECT_EQ(*window_output_size(224, 7, 2, 3, 3, 1, false), 112);
  EXPECT_EQ(*window_output_size(112, 3, 2, 1, 1, 1, false), 56);
  EXPECT_EQ(*window_output_size(5, 2, 2, 0, 0, 1, false), 2);
  EXPECT_EQ(*window_output_size(5, 2, 2, 0, 0, 1, true), 3);
  // ceil mode keeps a window only when it starts inside the input or the begin padding.
  EXPECT_EQ(*window_output_size(4, 2, 2, 0, 1, 1, true), 2);
  EXPECT_EQ(*window_output_size(8, 3, 1, 0, 0, 2, false), 4);
  EXPECT_TRUE(IsError(window_output_size(2, 5, 1, 0, 0, 1, false).status(), ErrorCode::InvalidArgument, {"does not fit"}));
  EXPECT_TRUE(IsError(window_output_size(8, 3, 0, 0, 0, 1, false).status(), ErrorCode::InvalidArgument));
  EXPECT_TRUE(IsError(window_output_size(8, 3, 1, -1, 0, 1, false).status(), ErrorCode::InvalidArgument));
}

struct PoolCase {
  int64_t kh, kw, sh, sw;
  std::vector<int64_t> pads;
  int64_t dh, dw;
  bool ceil, include_pad;
};

std::vector<double> pool_reference(const PoolCase& t, bool max, const HostTensor& x, int64_t oh, int64_t ow) {
  const Shape& s = x.shape();
  const int64_t h = s[2], w = s[3];
  std::vector<double> y;
  for (int64_t plane = 0; plane < s[0] * s[1]; ++plane) {
    for (int64_t oy = 0; oy < oh; ++oy) {
      for (int64_t ox = 0; ox < ow; ++ox) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t count = 0, padded = 0;
        for (int64_t r = 0; r < t.kh; ++r) {
          for (int64_t q = 0; q < t.kw; ++q) {
            const int64_t iy = oy * t.sh - t.pads[0] + r * t.dh, ix = ox * t.sw - t.pads[1] + q * t.dw;
            if (iy < h + t.pads[2] && ix < w + t.pads[3]) ++padded;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const double v = x.at((plane * h + iy) * w + ix);
            best = std::max(best, v);
            sum += v;
            ++count;
          }
        }
        y.push_back(max ? best : sum / static_cast<double>(t.include_pad ? padded : count));
      }
    }
  }
  return y;
}

OpAttrs pool_attrs(const PoolCase& t, bool max) {
  OpAttrs a;
  a.set("kernel", std::vector<int64_t>{t.kh, t.kw});
  a.set("strides", std::vector<int64_t>{t.sh, t.sw});
  a.set("pads", t.pads);
  a.set("ceil_mode", t.ceil);
  if (max) a.set("dilations", std::vector<int64_t>{t.dh, t.dw});
  if (!max) a.set("count_include_pad", t.include_pad);
  return a;
}

// Windows with pads, ceil_mode, count_include_pad and dilations, for both layouts' tests.
const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, false, false},
      {2, 2, 2, 2, {0, 0, 0, 0}, 1, 1, true, false},
      {3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, true, true},
      {3, 2, 1, 2, {0, 1, 2, 0}, 1, 1, false, true},
      {2, 2, 1, 1, {0, 0, 0, 0}, 2, 2, false, false},  // dilated (max only)
  };
  return cases;
}

TEST(Pool2d, MaxAndAverageMatchDirectReferences) {
  const std::vector<PoolCase>& cases = pool_cases();
  HostTensor x = HostTensor::random({2, 3, 9, 10}, 11);
  for (const PoolCase& t : cases) {
    for (bool max : {true, false}) {
      if (!max && (t.dh != 1 || t.dw != 1)) continue;
      OpAttrs a = pool_attrs(t, max);
      const int64_t oh = *window_output_size(9, t.kh, t.sh, t.pads[0], t.pads[2], t.dh, t.ceil);
      const int64_t ow = *window_output_size(10, t.kw, t.sw, t.pads[1], t.pads[3], t.dw, t.ceil);
      HostTensor y(DType::F32, {2, 3, oh, ow});
      Status s = run_op(max ? "max_pool2d" : "avg_pool2d", a, {x.view()}, {y.view()});
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_LT(testing::relative_error(y, pool_reference(t, max, x, oh, ow)), 1e-6)
          << (max ? "max" : "avg") << " kernel " << t.kh << "x" << t.kw << " ceil " << t.ceil;
    }
  }
}

// [a, b, c, d] -> [a, c, d, b]: an NCHW tensor (or OIHW weight) in channels-last order.
HostTensor to_channels_last(const HostTensor& t) {
  const Shape& s = t.shape();
  HostTensor out(DType::F32, {s[0], s[2], s[3], s[1]});
  for (int64_t a = 0; a < s[0]; ++a) {
    for (int64_t b = 0; b < s[1]; ++b) {
      for (int64_t c = 0; c < s[2]; ++c) {
        for (int64_t d = 0; d < s[3]; ++d) {
          out.f()[((a * s[2] + c) * s[3] + d) * s[1] + b] = t.f()[((a * s[1] + b) * s[2] + c) * s[3] + d];
        }
      }
    }
  }
  return out;
}

std::vector<double> to_channels_last(const std::vector<double>& v, const Shape& nchw) {
  HostTensor t(DType::F32, nchw);
  for (size_t i = 0; i < v.size(); ++i) t.f()[i] = static_cast<float>(v[i]);
  return to_channels_last(t).doubles();
}

// Layout nhwc (x [N, H, W, C], weight [K, KH, KW, C/g], y [N, OH, OW, K]): the plain kernel
// (im2row + product) and the prepared convolution (x and y handed to oneDNN where they lie)
// equal the direct NCHW reference, permuted.
TEST(Conv2d, ChannelsLastMatchesTheNchwReferenceInBothKernels) {
  uint32_t seed = 200;
  for (const ConvCase& t : conv_cases()) {
    SCOPED_TRACE(::testing::Message() << "c " << t.c << " k " << t.k << " groups " << t.groups << " kernel " << t.kh
                                      << "x" << t.kw);
    ConvOperands o = make_operands(t, seed += 3);
    const std::vector<double> want =
        to_channels_last(conv_reference(t, o.x, o.w, t.bias ? &o.b : nullptr), o.y.shape());
    HostTensor x = to_channels_last(o.x), w = to_channels_last(o.w), y = to_channels_last(o.y);
    OpAttrs attrs = conv_attrs(t);
    attrs.set("layout", std::string("nhwc"));
    std::vector<TensorView> in = {x.view(), w.view()};
    if (t.bias) in.push_back(o.b.view());
    Status s = run_op("conv2d", attrs, in, {y.view(), o.workspace.view()});
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_LT(testing::relative_error(y, want), 1e-6) << "plain kernel";

    const TensorView outs1[] = {y.view()};
    Result<Conv2dPlan> plan = plan_conv2d(attrs, in, outs1);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    EXPECT_TRUE(plan->channels_last);
    Result<std::unique_ptr<cpu::PackedConv>> packed = cpu::PackedConv::create(attrs, *plan, w.view());
    ASSERT_TRUE(packed.ok()) << packed.status().to_string();
    HostTensor y2(DType::F32, y.shape());
    const TensorView outs[] = {y2.view(), o.workspace.view()};
    s = (*packed)->run(in, outs);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_LT(testing::relative_error(y2, want), 1e-6) << "prepared convolution";
    // The NCHW weight is not the channels-last plan's (where the two shapes differ).
    if (o.w.shape() != w.shape()) {
      EXPECT_TRUE(IsError(cpu::PackedConv::create(attrs, *plan, o.w.view()).status(), ErrorCode::NotSupported));
    }
  }
}

// A fused clip, hard_sigmoid or hard_swish (the builder's host fusion) in both kernels and
// both layouts: the direct reference, then the clamp in double.
TEST(Conv2d, AFusedClampActivationMatchesTheConvolutionThenTheOp) {
  struct Act {
    const char* name;
    double alpha, beta, lo, hi;
    bool times_x;
  };
  const Act acts[] = {{"clip", 1, 0, -0.25, 0.5, false}, {"hard_sigmoid", 0.3, 0.4, 0, 1, false},
                      {"hard_swish", 1.0 / 6, 0.5, 0, 1, true}};
  uint32_t seed = 400;
  for (const Act& act : acts) {
    for (const ConvCase& base : {conv_cases()[1], conv_cases()[4]}) {
      ConvCase t = base;
      t.relu = false;
      for (bool last : {false, true}) {
        SCOPED_TRACE(::testing::Message() << act.name << " groups " << t.groups << " nhwc " << last);
        ConvOperands o = make_operands(t, seed += 3);
        std::vector<double> want = conv_reference(t, o.x, o.w, t.bias ? &o.b : nullptr);
        for (double& v : want) {
          const double c = std::min(std::max(act.alpha * v + act.beta, act.lo), act.hi);
          v = act.times_x ? v * c : c;
        }
        OpAttrs attrs = conv_attrs(t);
        attrs.set("activation", std::string(act.name));
        if (std::string(act.name) == "clip") {
          attrs.set("min", act.lo);
          attrs.set("max", act.hi);
        } else if (std::string(act.name) == "hard_sigmoid") {
          attrs.set("alpha", act.alpha);
          attrs.set("beta", act.beta);
        }
        HostTensor x = o.x, w = o.w, y = o.y;
        if (last) {
          attrs.set("layout", std::string("nhwc"));
          x = to_channels_last(o.x);
          w = to_channels_last(o.w);
          y = to_channels_last(o.y);
          want = to_channels_last(want, o.y.shape());
        }
        std::vector<TensorView> in = {x.view(), w.view()};
        if (t.bias) in.push_back(o.b.view());
        ASSERT_TRUE(run_op("conv2d", attrs, in, {y.view(), o.workspace.view()}).ok());
        EXPECT_LT(testing::relative_error(y, want), 1e-6) << "plain kernel";
        const TensorView outs1[] = {y.view()};
        Result<Conv2dPlan> plan = plan_conv2d(attrs, in, outs1);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        auto packed = cpu::PackedConv::create(attrs, *plan, w.view());
        ASSERT_TRUE(packed.ok()) << packed.status().to_string();
        HostTensor y2(DType::F32, y.shape());
        const TensorView outs[] = {y2.view(), o.workspace.view()};
        ASSERT_TRUE((*packed)->run(in, outs).ok());
        EXPECT_LT(testing::relative_error(y2, want), 1e-6) << "oneDNN post-ops";
      }
    }
  }
  // The clamp's attributes need their activation; an unknown activation is named.
  const ConvCase t = conv_cases()[1];
  ConvOperands o = make_operands(t, 5);
  OpAttrs attrs = conv_attrs(t);
  attrs.set("activation", std::string("gelu"));
  EXPECT_TRUE(IsError(run_op("conv2d", attrs, {o.x.view(), o.w.view(), o.b.view()}, {o.y.view(), o.workspace.view()}),
                      ErrorCode::InvalidArgument, {"activation 'gelu'"}));
}

TEST(Conv2d, ChannelsLastRefusesAnNchwWeightAndAnUnknownLayout) {
  const ConvCase t = conv_cases()[1];  // c 8, k 16, 3x3
  ConvOperands o = make_operands(t, 9);
  HostTensor x = to_channels_last(o.x), y = to_channels_last(o.y);
  OpAttrs attrs = conv_attrs(t);
  attrs.set("layout", std::string("nhwc"));
  // [16, 8, 3, 3] read as [K, KH, KW, C/g] has 3 channels, not 8.
  EXPECT_TRUE(IsError(run_op("conv2d", attrs, {x.view(), o.w.view(), o.b.view()}, {y.view(), o.workspace.view()}),
                      ErrorCode::InvalidArgument, {"[K, KH, KW, C/groups] (layout nhwc)"}));
  attrs.set("layout", std::string("chwn"));
  EXPECT_TRUE(IsError(run_op("conv2d", attrs, {o.x.view(), o.w.view(), o.b.view()}, {o.y.view(), o.workspace.view()}),
                      ErrorCode::InvalidArgument, {"layout", "chwn"}));
}

TEST(Pool2d, ChannelsLastMatchesTheNchwResult) {
  const std::vector<PoolCase>& cases = pool_cases();
  HostTensor x = HostTensor::random({2, 5, 9, 10}, 12);
  x.f()[7] = std::numeric_limits<float>::quiet_NaN();  // NaN wins in max pooling, in both layouts
  const HostTensor x_last = to_channels_last(x);
  for (const PoolCase& t : cases) {
    for (bool max : {true, false}) {
      if (!max && (t.dh != 1 || t.dw != 1)) continue;
      OpAttrs a = pool_attrs(t, max);
      const int64_t oh = *window_output_size(9, t.kh, t.sh, t.pads[0], t.pads[2], t.dh, t.ceil);
      const int64_t ow = *window_output_size(10, t.kw, t.sw, t.pads[1], t.pads[3], t.dw, t.ceil);
      const std::string op = max ? "max_pool2d" : "avg_pool2d";
      HostTensor y(DType::F32, {2, 5, oh, ow}), y_last(DType::F32, {2, oh, ow, 5});
      ASSERT_TRUE(run_op(op, a, {x.view()}, {y.view()}).ok());
      a.set("layout", std::string("nhwc"));
      Status s = run_op(op, a, {x_last.view()}, {y_last.view()});
      ASSERT_TRUE(s.ok()) << s.to_string();
      const HostTensor want = to_channels_last(y);
      for (int64_t i = 0; i < want.numel(); ++i) {
        const float a_v = want.f()[i], b_v = y_last.f()[i];
        ASSERT_TRUE((std::isnan(a_v) && std::isnan(b_v)) || std::abs(a_v - b_v) <= 1e-6f * (1.0f + std::abs(a_v)))
            << op << " element " << i << ": " << a_v << " vs " << b_v;
      }
      // An NCHW-shaped output is refused in layout nhwc (where the two shapes differ).
      if (y.shape() != y_last.shape()) {
        EXPECT_TRUE(IsError(run_op(op, a, {x_last.view()}, {y.view()}), ErrorCode::InvalidArgument));
      }
    }
  }
}

TEST(Pool2d, RefusesBadAttributes) {
  HostTensor x = HostTensor::random({1, 2, 6, 6}, 1);
  HostTensor y(DType::F32, {1, 2, 3, 3});
  OpAttrs none;
  EXPECT_TRUE(IsError(run_op("max_pool2d", none, {x.view()}, {y.view()}), ErrorCode::NotFound, {"kernel"}));
  OpAttrs pads;
  pads.set("kernel", std::vector<int64_t>{2, 2});
  pads.set("strides", std::vector<int64_t>{2, 2});
  pads.set("pads", std::vector<int64_t>{2, 0, 0, 0});
  EXPECT_TRUE(IsError(run_op("avg_pool2d", pads, {x.view()}, {y.view()}), ErrorCode::InvalidArgument, {"smaller than the kernel"}));
  OpAttrs dil;
  dil.set("kernel", std::vector<int64_t>{2, 2});
  dil.set("dilations", std::vector<int64_t>{2, 2});
  EXPECT_TRUE(IsError(run_op("avg_pool2d", dil, {x.view()}, {y.view()}), ErrorCode::NotSupported, {"dilations"}));
  OpAttrs ok;
  ok.set("kernel", std::vector<int64_t>{2, 2});
  ok.set("strides", std::vector<int64_t>{2, 2});
  HostTensor wrong(DType::F32, {1, 2, 2, 3});
  EXPECT_TRUE(IsError(run_op("max_pool2d", ok, {x.view()}, {wrong.view()}), ErrorCode::InvalidArgument, {"output"}));
  HostTensor flat = HostTensor::random({2, 6}, 1);
  EXPECT_TRUE(IsError(run_op("max_pool2d", ok, {flat.view()}, {y.view()}), ErrorCode::InvalidArgument, {"[N, C, H, W]"}));
}

}  // namespace
}  // namespace planrt::kernels
