#include "support/plan_cases.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <random>

#include <fmt/format.h>

namespace planrt::test {
namespace {

using planning::TensorLifetime;

// splitmix64: tiny and fully specified, unlike the std distributions whose output differs
// between standard libraries.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi] (multiply-shift; its bias is far below what a test could see).
  uint64_t range(uint64_t lo, uint64_t hi) {
    const unsigned __int128 span = static_cast<unsigned __int128>(hi - lo) + 1;
    return lo + static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * span) >> 64);
  }
  bool chance(unsigned percent) { return range(0, 99) < percent; }
  template <typename T, size_t N>
  T pick(const std::array<T, N>& values) {
    return values[range(0, N - 1)];
  }

 private:
  uint64_t state_;
};

// Records a method as it is "executed": each op reads its inputs and defines its outputs
// at the current instruction. Generators run until full() and then finish the block they
// are in, so no case is a graph cut off mid-block.
class Recorder {
 public:
  explicit Recorder(size_t target) : target_(target) { tensors_.reserve(target); }

  bool full() const { return tensors_.size() >= target_; }

  // One instruction; returns the output ids.
  std::vector<int> op(std::initializer_list<int> inputs,
                      std::initializer_list<uint64_t> output_bytes) {
    for (int id : inputs) tensors_[static_cast<size_t>(id)].last_use = now_;
    std::vector<int> outputs;
    for (uint64_t bytes : output_bytes) {
      outputs.push_back(static_cast<int>(tensors_.size()));
      tensors_.push_back(TensorLifetime{bytes, now_, now_});
    }
    ++now_;
    return outputs;
  }
  int op1(std::initializer_list<int> inputs, uint64_t output_bytes) {
    return op(inputs, {output_bytes})[0];
  }

  // A method output: alive until the method returns.
  void keep_to_end(int id) { kept_.push_back(id); }

  std::vector<TensorLifetime> finish() {
    const int64_t last = now_ == 0 ? 0 : now_ - 1;
    for (int id : kept_) tensors_[static_cast<size_t>(id)].last_use = last;
    return std::move(tensors_);
  }

 private:
  size_t target_;
  int64_t now_ = 0;
  std::vector<TensorLifetime> tensors_;
  std::vector<int> kept_;
};

constexpr std::array<uint64_t, 2> kDtypeBytes = {2, 4};

// A chain of ops in runs at one activation size; the next run halves or doubles it. An op
// reads the output from two ops back at random (no block structure).
void generate_random_chain(Rng& rng, Recorder& rec) {
  uint64_t size = rng.range(1, 512) * rng.pick(std::array<uint64_t, 4>{256, 512, 1024, 4096}) *
                  rng.pick(kDtypeBytes);
  int prev = rec.op1({}, size);
  int before = -1;
  while (!rec.full()) {
    const uint64_t ops = rng.range(2, 8);
    for (uint64_t i = 0; i < ops; ++i) {
      // A reduction (norm statistics) now and then: small, odd-sized.
      const uint64_t out = rng.chance(10) ? rng.range(4, 4096) : size;
      const int next = before >= 0 && rng.chance(20) ? rec.op1({prev, before}, out)
                                                     : rec.op1({prev}, out);
      before = prev;
      prev = next;
    }
    if (rng.chance(50) && size > 4096) size /= 2;
    if (rng.chance(15)) size *= 2;
  }
  rec.keep_to_end(prev);
}

// A ResNet: stages of basic or bottleneck blocks whose input is kept until the block's
// residual add; conv, batch norm and relu are separate ops unless the case fuses them.
class ResNet {
 public:
  ResNet(Rng& rng, Recorder& rec) : rng_(rng), rec_(rec) {
    bottleneck_ = rng.chance(50);
    fused_ = rng.chance(50);
    dtype_ = rng.pick(kDtypeBytes);
    batch_ = rng.range(1, 32);
  }

  void run() {
    while (!rec_.full()) {
      const uint64_t plane = 56 * 56 * batch_ * dtype_;  // one channel after the stem
      int x = rec_.op1({}, 3 * 224 * 224 * batch_ * dtype_);
      x = conv_bn(x, 4 * 64 * plane, /*relu=*/true);
      x = rec_.op1({x}, 64 * plane);  // max pool
      uint64_t channels = bottleneck_ ? 256 : 64;
      uint64_t pixels_div = 1;
      for (int stage = 0; stage < 4 && !rec_.full(); ++stage) {
        const uint64_t blocks = rng_.range(2, 6);
        for (uint64_t i = 0; i < blocks && !rec_.full(); ++i) {
          const bool first = i == 0;
          const bool changes_shape = first && (stage > 0 || bottleneck_);
          x = block(x, channels * plane / pixels_div, changes_shape);
        }
        channels *= 2;
        pixels_div *= 4;
      }
      x = rec_.op1({x}, channels / 2 * batch_ * dtype_);  // global average pool
      x = rec_.op1({x}, 1000 * batch_ * dtype_);          // classifier
      rec_.keep_to_end(x);
    }
  }

 private:
  int conv_bn(int x, uint64_t bytes, bool relu) {
    if (fused_) return rec_.op1({x}, bytes);
    x = rec_.op1({x}, bytes);  // conv
    x = rec_.op1({x}, bytes);  // batch norm
    return relu ? rec_.op1({x}, bytes) : x;
  }

  int block(int x, uint64_t out_bytes, bool project) {
    const int shortcut = project ? conv_bn(x, out_bytes, /*relu=*/false) : x;
    int h;
    if (bottleneck_) {
      h = conv_bn(x, out_bytes / 4, true);
      h = conv_bn(h, out_bytes / 4, true);
      h = conv_bn(h, out_bytes, false);
    } else {
      h = conv_bn(x, out_bytes, true);
      h = conv_bn(h, out_bytes, false);
    }
    const int sum = rec_.op1({h, shortcut}, out_bytes);
    return fused_ ? sum : rec_.op1({sum}, out_bytes);  // relu
  }

  Rng& rng_;
  Recorder& rec_;
  bool bottleneck_ = false;
  bool fused_ = false;
  uint64_t dtype_ = 4;
  uint64_t batch_ = 1;
};

// A U-Net: each encoder level's output is kept until the decoder level that mirrors it.
void generate_unet(Rng& rng, Recorder& rec) {
  while (!rec.full()) {
    const uint64_t levels = rng.range(2, 5);
    const uint64_t ops_per_level = rng.range(2, 5);
    const uint64_t top = rng.range(16, 256) * rng.range(16, 256) * 64 * rng.pick(kDtypeBytes);
    std::vector<int> skips;
    int x = rec.op1({}, top);
    uint64_t size = top;
    for (uint64_t level = 0; level < levels; ++level) {
      for (uint64_t i = 0; i < ops_per_level; ++i) x = rec.op1({x}, size);
      skips.push_back(x);
      size /= 2;  // spatial / 4, channels * 2
      x = rec.op1({x}, size);
    }
    for (uint64_t level = levels; level-- > 0;) {
      size *= 2;
      x = rec.op1({x}, size);                 // upsample
      x = rec.op1({x, skips[level]}, 2 * size);  // concat with the skip
      for (uint64_t i = 0; i < ops_per_level; ++i) x = rec.op1({x}, size);
    }
    rec.keep_to_end(x);
  }
}

struct BlockShape {
  uint64_t seq = 1;     // new tokens
  uint64_t past = 0;    // cached tokens (decoder with a kv cache)
  uint64_t hidden = 0;
  uint64_t heads = 0;
  uint64_t ffn = 0;
  uint64_t dtype = 4;
  bool fused_attention = false;
  bool gated_ffn = false;
};

BlockShape draw_block_shape(Rng& rng) {
  BlockShape b;
  b.hidden = rng.pick(std::array<uint64_t, 6>{256, 512, 768, 1024, 2048, 4096});
  b.heads = b.hidden / rng.pick(std::array<uint64_t, 2>{64, 128});
  b.dtype = rng.pick(kDtypeBytes);
  b.fused_attention = rng.chance(50);
  b.gated_ffn = rng.chance(50);
  // Gated FFNs use ~8/3 of the hidden size, rounded to 256 like the models that do it.
  b.ffn = b.gated_ffn ? (b.hidden * 8 / 3 + 255) / 256 * 256 : 4 * b.hidden;
  return b;
}

// One pre-LN block on residual x; returns the new residual. k/v go to *k_out and *v_out.
int transformer_block(Recorder& rec, const BlockShape& b, int x, int* k_out, int* v_out) {
  const uint64_t act = b.seq * b.hidden * b.dtype;
  const uint64_t kv = (b.past + b.seq) * b.hidden * b.dtype;
  const uint64_t scores = b.heads * b.seq * (b.past + b.seq) * b.dtype;
  const uint64_t stats = b.seq * 4;  // mean/rstd in f32

  const int ln1 = rec.op({x}, {act, stats, stats})[0];
  const int q = rec.op1({ln1}, act);
  int k = rec.op1({ln1}, act);
  int v = rec.op1({ln1}, act);
  if (b.past > 0) {  // append to the cache: the grown k/v are new tensors
    k = rec.op1({k}, kv);
    v = rec.op1({v}, kv);
  }
  int ctx;
  if (b.fused_attention) {
    ctx = rec.op1({q, k, v}, act);
  } else {
    const int s = rec.op1({q, k}, scores);
    const int p = rec.op1({s}, scores);
    ctx = rec.op1({p, v}, act);
  }
  const int merged = rec.op1({ctx}, act);  // [B,H,S,D] -> [B,S,H*D]
  const int o = rec.op1({merged}, act);
  const int x1 = rec.op1({x, o}, act);
  const int ln2 = rec.op({x1}, {act, stats, stats})[0];
  int hidden;
  if (b.gated_ffn) {
    const int gate = rec.op1({ln2}, b.seq * b.ffn * b.dtype);
    const int up = rec.op1({ln2}, b.seq * b.ffn * b.dtype);
    const int silu = rec.op1({gate}, b.seq * b.ffn * b.dtype);
    hidden = rec.op1({silu, up}, b.seq * b.ffn * b.dtype);
  } else {
    const int up = rec.op1({ln2}, b.seq * b.ffn * b.dtype);
    hidden = rec.op1({up}, b.seq * b.ffn * b.dtype);
  }
  const int down = rec.op1({hidden}, act);
  *k_out = k;
  *v_out = v;
  return rec.op1({x1, down}, act);
}

void generate_transformer(Rng& rng, Recorder& rec, bool kv_outputs) {
  BlockShape b = draw_block_shape(rng);
  if (kv_outputs) {
    b.seq = rng.range(1, 16);
    b.past = rng.range(1, 4096);
  } else {
    b.seq = rng.range(1, 2048);
  }
  const int ids = rec.op1({}, b.seq * 8);
  int x = rec.op1({ids}, b.seq * b.hidden * b.dtype);  // embedding
  while (!rec.full()) {
    int k = 0;
    int v = 0;
    x = transformer_block(rec, b, x, &k, &v);
    if (kv_outputs) {
      rec.keep_to_end(k);
      rec.keep_to_end(v);
    }
  }
  rec.keep_to_end(x);
}

std::vector<TensorLifetime> generate_uniform_random(Rng& rng, size_t n) {
  std::vector<TensorLifetime> tensors(n);
  const uint64_t horizon = n;
  for (TensorLifetime& t : tensors) {
    t.first_use = static_cast<int64_t>(rng.range(0, horizon - 1));
    t.last_use = t.first_use + static_cast<int64_t>(rng.range(0, 20));
    t.size_bytes = rng.range(1, uint64_t{1} << 20);
  }
  return tensors;
}

constexpr std::array<PlanFamily, 6> kAll = {
    PlanFamily::Transformer, PlanFamily::TransformerKv, PlanFamily::ResNet,
    PlanFamily::UNet,        PlanFamily::RandomChain,   PlanFamily::UniformRandom};

}  // namespace

std::span<const PlanFamily> all_plan_families() { return kAll; }
std::span<const PlanFamily> bounded_plan_families() {
  return std::span<const PlanFamily>(kAll).first(4);
}

std::string_view plan_family_name(PlanFamily family) {
  switch (family) {
    case PlanFamily::ResNet:
      return "resnet";
    case PlanFamily::UNet:
      return "unet";
    case PlanFamily::RandomChain:
      return "random-chain";
    case PlanFamily::Transformer:
      return "transformer";
    case PlanFamily::TransformerKv:
      return "transformer-kv";
    case PlanFamily::UniformRandom:
      return "uniform-random";
  }
  return "unknown";
}

PlanCase make_plan_case(PlanFamily family, uint64_t seed, size_t num_tensors) {
  PlanCase c;
  c.family = family;
  c.seed = seed;
  // Mixing in the family keeps equal seeds of different families unrelated.
  Rng rng(seed * 0x100000001B3ull + static_cast<uint64_t>(family) + 1);
  Recorder rec(num_tensors);
  switch (family) {
    case PlanFamily::ResNet:
      ResNet(rng, rec).run();
      break;
    case PlanFamily::UNet:
      generate_unet(rng, rec);
      break;
    case PlanFamily::RandomChain:
      generate_random_chain(rng, rec);
      break;
    case PlanFamily::Transformer:
      generate_transformer(rng, rec, /*kv_outputs=*/false);
      break;
    case PlanFamily::TransformerKv:
      generate_transformer(rng, rec, /*kv_outputs=*/true);
      break;
    case PlanFamily::UniformRandom:
      c.tensors = generate_uniform_random(rng, num_tensors);
      return c;
  }
  c.tensors = rec.finish();
  return c;
}

std::vector<PlanCase> make_plan_cases(PlanFamily family, uint64_t first_seed, size_t count,
                                      size_t min_tensors, size_t max_tensors) {
  std::vector<PlanCase> cases;
  cases.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t seed = first_seed + i;
    Rng sizer(seed ^ 0xA5A5A5A5A5A5A5A5ull);
    cases.push_back(make_plan_case(family, seed, sizer.range(min_tensors, max_tensors)));
  }
  return cases;
}

std::string describe(const PlanCase& c) {
  return fmt::format("{} seed {} ({} tensors)", plan_family_name(c.family), c.seed,
                     c.tensors.size());
}

std::vector<planning::TensorLifetime> perfect_instance(uint32_t seed, int pieces, int64_t time, uint64_t capacity) {
  struct Rect {
    int64_t t0, t1;
    uint64_t y0, y1;
  };
  std::mt19937 rng(seed);
  std::vector<Rect> rects = {{0, time, 0, capacity}};
  while (static_cast<int>(rects.size()) < pieces) {
    std::uniform_int_distribution<size_t> pick(0, rects.size() - 1);
    const size_t k = pick(rng);
    Rect r = rects[k];
    const bool split_time = (rng() & 1) != 0;
    if (split_time && r.t1 - r.t0 >= 2) {
      const int64_t cut = std::uniform_int_distribution<int64_t>(r.t0 + 1, r.t1 - 1)(rng);
      rects[k] = {r.t0, cut, r.y0, r.y1};
      rects.push_back({cut, r.t1, r.y0, r.y1});
    } else if (!split_time && r.y1 - r.y0 >= 2) {
      const uint64_t cut = std::uniform_int_distribution<uint64_t>(r.y0 + 1, r.y1 - 1)(rng);
      rects[k] = {r.t0, r.t1, r.y0, cut};
      rects.push_back({r.t0, r.t1, cut, r.y1});
    }
  }
  std::vector<planning::TensorLifetime> out;
  for (const Rect& r : rects) out.push_back({r.y1 - r.y0, r.t0, r.t1 - 1});
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}


}  // namespace planrt::test
