// The transformer template (docs/model-format.md) checked end to end against an independent
// double-precision implementation of what it claims to compute: a pre-LN encoder,
//
//   h = x + Wo·SDPA(heads of Wq·LN1(x), Wk·LN1(x), Wv·LN1(x))
//   y = h + W2·GELU(W1·LN2(h))
//
// with PyTorch's semantics (Linear y = x W^T + b; LayerNorm eps 1e-5 with the biased
// variance; exact-erf GELU; SDPA scale 1/sqrt(Dh), not causal; heads by reshape
// [1, S, H, Dh] then permute to [1, H, S, Dh], and back). The template is built, serialized,
// loaded by the runtime and run on the CPU; the reference reads the model's weights back by
// name from the safetensors file the builder exports, so it shares nothing with the
// kernels or the template's wiring.
//
// The random template initializes layer norms to 1/0 and biases to 0, which would hide a
// swapped or ignored norm/bias operand; the perturbed cases rewrite those tensors (and
// scale the projections so attention is far from uniform) and rebuild the template from
// that file, so every parameter matters.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "planrt/builder/builder.h"
#include "planrt/runtime/program.h"
#include "support/built_programs.h"

namespace planrt {
namespace {

namespace fs = std::filesystem;

// The tensors of a safetensors file as f32 vectors, by name.
struct Weights {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, std::vector<int64_t>> shapes;

  const std::vector<float>& at(const std::string& name) const {
    auto it = values.find(name);
    EXPECT_NE(it, values.end()) << "missing weight " << name;
    static const std::vector<float> empty;
    return it == values.end() ? empty : it->second;
  }
};

Result<Weights> read_weights(const std::string& path) {
  PLANRT_ASSIGN_OR_RETURN(format::SafetensorsFile file, format::SafetensorsFile::open(path));
  Weights w;
  for (const format::SafetensorsTensor& t : file.tensors()) {
    if (t.dtype != DType::F32) {
      return make_error(ErrorCode::InvalidArgument, "weight {} is not f32", t.name);
    }
    std::vector<float> v(t.data.size() / sizeof(float));
    std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
    w.values[t.name] = std::move(v);
    w.shapes[t.name] = t.shape;
  }
  return w;
}

Status write_weights(const std::string& path, const Weights& w) {
  std::vector<format::SafetensorsTensor> tensors;
  for (const auto& [name, v] : w.values) {
    format::SafetensorsTensor t;
    t.name = name;
    t.dtype = DType::F32;
    t.shape = w.shapes.at(name);
    t.data = {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
    tensors.push_back(std::move(t));
  }
  return format::write_safetensors(path, tensors);
}

// ---- The double-precision reference (plain loops, row-major [S, features]). ----

using Mat = std::vector<double>;  // [rows, cols]

Mat layer_norm(const Mat& x, int64_t s, int64_t d, const std::vector<float>& w,
               const std::vector<float>& b) {
  Mat y(x.size());
  for (int64_t i = 0; i < s; ++i) {
    const double* row = &x[static_cast<size_t>(i * d)];
    double mean = 0;
    for (int64_t j = 0; j < d; ++j) mean += row[j];
    mean /= static_cast<double>(d);
    double var = 0;
    for (int64_t j = 0; j < d; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(d);  // biased, as torch.nn.LayerNorm
    double inv = 1.0 / std::sqrt(var + 1e-5);
    for (int64_t j = 0; j < d; ++j) {
      y[static_cast<size_t>(i * d + j)] = (row[j] - mean) * inv * w[static_cast<size_t>(j)] +
                                          b[static_cast<size_t>(j)];
    }
  }
  return y;
}

// y = x W^T + b with W [out, in].
Mat linear(const Mat& x, int64_t s, int64_t in, int64_t out, const std::vector<float>& w,
           const std::vector<float>& b) {
  EXPECT_EQ(w.size(), static_cast<size_t>(out * in));
  EXPECT_EQ(b.size(), static_cast<size_t>(out));
  Mat y(static_cast<size_t>(s * out));
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = b[static_cast<size_t>(o)];
      for (int64_t k = 0; k < in; ++k) {
        acc += x[static_cast<size_t>(i * in + k)] * static_cast<double>(w[static_cast<size_t>(o * in + k)]);
      }
      y[static_cast<size_t>(i * out + o)] = acc;
    }
  }
  return y;
}

// Multi-head attention on [S, D] projections: head h of position i is columns
// [h*Dh, (h+1)*Dh) (reshape [1, S, H, Dh] + permute [0, 2, 1, 3]); the result is laid
// back out the same way (permute back + reshape [1, S, D]).
Mat attention(const Mat& q, const Mat& k, const Mat& v, int64_t s, int64_t d, int64_t heads) {
  const int64_t dh = d / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  Mat out(static_cast<size_t>(s * d), 0.0);
  std::vector<double> p(static_cast<size_t>(s));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < s; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < dh; ++e) {
          dot += q[static_cast<size_t>(i * d + h * dh + e)] * k[static_cast<size_t>(j * d + h * dh + e)];
        }
        p[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx);
        sum += p[static_cast<size_t>(j)];
      }
      for (int64_t e = 0; e < dh; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < s; ++j) {
          acc += p[static_cast<size_t>(j)] * v[static_cast<size_t>(j * d + h * dh + e)];
        }
        out[static_cast<size_t>(i * d + h * dh + e)] = acc / sum;
      }
    }
  }
  return out;
}

Mat gelu(Mat x) {
  for (double& v : x) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  return x;
}

void add_into(Mat& a, const Mat& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
}

std::vector<double> reference_forward(const Weights& w, const std::vector<float>& x_in,
                                      int64_t s, int64_t d, int64_t heads, int64_t layers) {
  Mat x(x_in.begin(), x_in.end());
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    const int64_t ffn = w.shapes.at(p + "mlp.fc1.weight")[0];
    Mat a = layer_norm(x, s, d, w.at(p + "ln1.weight"), w.at(p + "ln1.bias"));
    Mat q = linear(a, s, d, d, w.at(p + "attn.q.weight"), w.at(p + "attn.q.bias"));
    Mat k = linear(a, s, d, d, w.at(p + "attn.k.weight"), w.at(p + "attn.k.bias"));
    Mat v = linear(a, s, d, d, w.at(p + "attn.v.weight"), w.at(p + "attn.v.bias"));
    Mat att = attention(q, k, v, s, d, heads);
    Mat h = x;
    add_into(h, linear(att, s, d, d, w.at(p + "attn.o.weight"), w.at(p + "attn.o.bias")));
    Mat m = layer_norm(h, s, d, w.at(p + "ln2.weight"), w.at(p + "ln2.bias"));
    m = gelu(linear(m, s, d, ffn, w.at(p + "mlp.fc1.weight"), w.at(p + "mlp.fc1.bias")));
    Mat y = h;
    add_into(y, linear(m, s, ffn, d, w.at(p + "mlp.fc2.weight"), w.at(p + "mlp.fc2.bias")));
    x = std::move(y);
  }
  return x;
}

// ---- Running the template through the runtime. ----

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("planrt_tref_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

struct Built {
  Program program;
  Weights weights;  // exported back from the built model
};

Result<Built> build(const builder::TransformerOptions& options, const std::string& export_path) {
  PLANRT_ASSIGN_OR_RETURN(builder::Model model, builder::make_transformer(options));
  PLANRT_RETURN_IF_ERROR(builder::write_weights_safetensors(model, export_path));
  PLANRT_ASSIGN_OR_RETURN(Weights w, read_weights(export_path));
  PLANRT_ASSIGN_OR_RETURN(Program program, fixtures::load_built_program(model));
  return Built{std::move(program), std::move(w)};
}

std::vector<float> make_input(int64_t s, int64_t d, uint32_t seed, float std_dev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, std_dev);
  std::vector<float> x(static_cast<size_t>(s * d));
  for (float& v : x) v = n(rng);
  return x;
}

Result<std::vector<float>> run(Method& m, std::vector<float>& x, int64_t s, int64_t d) {
  TensorView in = TensorView::contiguous(x.data(), DType::F32, {1, s, d});
  PLANRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, m.execute({&in, 1}));
  if (out.size() != 1 || !(out[0].shape() == Shape{1, s, d})) {
    return make_error(ErrorCode::Internal, "unexpected output");
  }
  auto v = out[0].values<float>();
  return std::vector<float>(v.begin(), v.end());
}

double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double e = static_cast<double>(got[i]) - want[i];
    num += e * e;
    den += want[i] * want[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

bool all_finite(const std::vector<float>& v) {
  for (float f : v) {
    if (!std::isfinite(f)) return false;
  }
  return true;
}

// Rewrites the exported weights so that every parameter matters: layer-norm weights
// 1 + 0.3·N, every bias 0.2·N, the projections scaled so attention scores are O(1).
Weights perturb(Weights w, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (auto& [name, v] : w.values) {
    const bool norm = name.find(".ln") != std::string::npos;
    const bool bias = name.ends_with(".bias");
    for (float& f : v) {
      if (norm && !bias) {
        f = 1.0f + 0.3f * n(rng);
      } else if (bias) {
        f = 0.2f * n(rng);
      } else {
        f *= 8.0f;  // std 0.02 -> 0.16, i.e. about 1/sqrt(in) for these widths
      }
    }
  }
  return w;
}

struct Case {
  builder::TransformerOptions options;
  std::vector<int64_t> seq_lens;
  // A small input makes the first layer norm's eps visible (1e-6 instead of 1e-5 moves
  // the output by ~3e-6 at std 1, much more at std 0.1).
  float input_std = 1.0f;
};

// Runs the case at every sequence length (the same loaded method, so arenas are reused)
// and checks each output against the reference; returns the measured relative errors.
std::vector<double> check_against_reference(const Case& c, const std::string& export_path) {
  std::vector<double> errors;
  Result<Built> b = build(c.options, export_path);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (!b.ok()) return errors;
  Result<Method> m = b->program.load_method("forward");
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return errors;
  const int64_t d = c.options.d_model;
  for (int64_t s : c.seq_lens) {
    std::vector<float> x = make_input(s, d, static_cast<uint32_t>(100 + s), c.input_std);
    Result<std::vector<float>> got = run(*m, x, s, d);
    EXPECT_TRUE(got.ok()) << got.status().to_string();
    if (!got.ok()) continue;
    EXPECT_TRUE(all_finite(*got)) << "S=" << s;
    std::vector<double> want = reference_forward(b->weights, x, s, d, c.options.heads, c.options.layers);
    double err = rel_error(*got, want);
    EXPECT_LT(err, 1e-5) << "S=" << s << " weights " << c.options.weights;
    std::printf("[ transformer reference ] weights=%s S=%lld input std %.2g rel_error=%.3e\n",
                fs::path(c.options.weights).filename().c_str(), static_cast<long long>(s),
                static_cast<double>(c.input_std), err);
    errors.push_back(err);
  }
  return errors;
}

builder::TransformerOptions small_options() {
  builder::TransformerOptions o;
  o.layers = 2;
  o.d_model = 32;
  o.heads = 4;
  o.ffn = 48;
  o.max_seq = 16;
  o.weights = "random:7";
  o.partition = "cpu";
  return o;
}

// Exports the random template's weights, perturbs them and writes them to `path`.
Weights perturbed_weights_file(const builder::TransformerOptions& random_options,
                               const std::string& export_path, const std::string& path) {
  Result<builder::Model> model = builder::make_transformer(random_options);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return {};
  Status st = builder::write_weights_safetensors(*model, export_path);
  EXPECT_TRUE(st.ok()) << st.to_string();
  Result<Weights> w = read_weights(export_path);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  if (!w.ok()) return {};
  Weights p = perturb(std::move(w).value(), 1234);
  st = write_weights(path, p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return p;
}

TEST(TransformerTemplate, MatchesADoublePrecisionReference) {
  TempDir dir;
  Case c{small_options(), {5, 16}};
  std::vector<double> errors = check_against_reference(c, dir.file("random.safetensors"));
  EXPECT_EQ(errors.size(), 2u);
}

TEST(TransformerTemplate, MatchesTheReferenceWithRandomNormsAndBiasesFromAWeightsFile) {
  TempDir dir;
  Weights written = perturbed_weights_file(small_options(), dir.file("export.safetensors"),
                                           dir.file("perturbed.safetensors"));
  ASSERT_FALSE(written.values.empty());
  Case c{small_options(), {5, 16, 1}, 0.1f};
  c.options.weights = dir.file("perturbed.safetensors");
  std::vector<double> errors = check_against_reference(c, dir.file("reexport.safetensors"));
  EXPECT_EQ(errors.size(), 3u);
  // The model really uses the file: its exported weights are the ones written.
  Result<Weights> back = read_weights(dir.file("reexport.safetensors"));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->values, written.values);
}

TEST(TransformerTemplate, MatchesTheReferenceWithPerBlockFfnWidths) {
  TempDir dir;
  builder::TransformerOptions o = small_options();
  o.layers = 3;
  o.ffn_per_block = {48, 24, 72};
  {
    Case c{o, {5, 16}};
    std::vector<double> errors = check_against_reference(c, dir.file("random.safetensors"));
    EXPECT_EQ(errors.size(), 2u);
  }
  perturbed_weights_file(o, dir.file("export.safetensors"), dir.file("perturbed.safetensors"));
  Case c{o, {5, 16}, 0.1f};
  c.options.weights = dir.file("perturbed.safetensors");
  std::vector<double> errors = check_against_reference(c, dir.file("reexport.safetensors"));
  EXPECT_EQ(errors.size(), 2u);
  Result<Weights> back = read_weights(dir.file("reexport.safetensors"));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->shapes.at("blocks.1.mlp.fc1.weight"), (std::vector<int64_t>{24, 32}));
  EXPECT_EQ(back->shapes.at("blocks.2.mlp.fc2.weight"), (std::vector<int64_t>{32, 72}));
}

// The comparison can fail: changing any one parameter kind of the file (here one element
// of the last block's fc2 weight, one of a layer-norm bias, one of a q bias) moves the
// output well beyond the tolerance, and the reference follows the change.
TEST(TransformerTemplate, OutputFollowsAChangeToOneWeight) {
  TempDir dir;
  Weights w = perturbed_weights_file(small_options(), dir.file("export.safetensors"),
                                     dir.file("base.safetensors"));
  ASSERT_FALSE(w.values.empty());
  const int64_t s = 5, d = 32;
  builder::TransformerOptions o = small_options();
  o.weights = dir.file("base.safetensors");
  Result<Built> base = build(o, dir.file("base_re.safetensors"));
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  Result<Method> bm = base->program.load_method("forward");
  ASSERT_TRUE(bm.ok()) << bm.status().to_string();
  std::vector<float> x = make_input(s, d, 42);
  Result<std::vector<float>> y0 = run(*bm, x, s, d);
  ASSERT_TRUE(y0.ok()) << y0.status().to_string();
  std::vector<double> ref0 = reference_forward(base->weights, x, s, d, o.heads, o.layers);
  EXPECT_LT(rel_error(*y0, ref0), 1e-5);

  for (const char* name : {"blocks.1.mlp.fc2.weight", "blocks.0.ln1.bias", "blocks.1.attn.q.bias",
                           "blocks.0.ln2.weight", "blocks.1.attn.v.weight"}) {
    SCOPED_TRACE(name);
    Weights changed = w;
    ASSERT_TRUE(changed.values.count(name));
    changed.values[name][3] += 0.5f;
    std::string path = dir.file(std::string("changed_") + name + ".safetensors");
    ASSERT_TRUE(write_weights(path, changed).ok());
    builder::TransformerOptions oc = o;
    oc.weights = path;
    Result<Built> b = build(oc, dir.file("changed_re.safetensors"));
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    Result<Method> m = b->program.load_method("forward");
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    Result<std::vector<float>> y1 = run(*m, x, s, d);
    ASSERT_TRUE(y1.ok()) << y1.status().to_string();
    EXPECT_GT(rel_error(*y1, ref0), 1e-3) << "the change does not reach the output";
    std::vector<double> ref1 = reference_forward(b->weights, x, s, d, o.heads, o.layers);
    EXPECT_LT(rel_error(*y1, ref1), 1e-5);
  }
}

}  // namespace
}  // namespace planrt
