#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "builder/graph.h"
#include "planning/method_plan.h"
#include "builder_test_util.h"
#include "format/program_file.h"
#include "planrt/builder/builder.h"

namespace planrt::builder {
namespace {

using btest::expect_plans_valid;
using btest::find_value;
using btest::small;

TEST(Transformer, BuildsAtSeveralSizesWithValidTightPlans) {
  for (int64_t layers = 1; layers <= 4; ++layers) {
    for (int64_t d_model : {64, 512}) {
      TransformerOptions o = small(layers);
      o.d_model = d_model;
      o.heads = 8;
      o.ffn = 4 * d_model;
      o.max_seq = d_model == 512 ? 2048 : 128;
      SCOPED_TRACE(testing::Message() << "layers " << layers << " d_model " << d_model);
      ASSERT_OK_AND_ASSIGN(Model model, make_transformer(o));
      EXPECT_EQ(model.num_constants(), static_cast<size_t>(16 * layers));
      ASSERT_OK_AND_ASSIGN(BuiltProgram program, build_program(model));
      expect_plans_valid(program.program());
      auto plans = program.plans();
      ASSERT_EQ(plans.size(), 1u);
      EXPECT_EQ(plans[0].method, "forward");
      EXPECT_TRUE(plans[0].device.is_cpu());
      EXPECT_EQ(plans[0].planner, "greedy-by-size");
      EXPECT_LE(plans[0].ratio(), 1.05) << plans[0].planned_bytes << " / " << plans[0].lower_bound_bytes;
      EXPECT_GE(plans[0].ratio(), 1.0);
    }
  }
}

TEST(Transformer, ProgramHasOneMethodWithDynamicSequenceDim) {
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(2)));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  const fb::ProgramT& p = built.program();
  ASSERT_EQ(p.methods.size(), 1u);
  const fb::MethodT& m = *p.methods[0];
  EXPECT_EQ(m.name, "forward");
  ASSERT_EQ(m.dims.size(), 1u);
  EXPECT_EQ(m.dims[0]->name, "S");
  EXPECT_EQ(m.dims[0]->min, 1);
  EXPECT_EQ(m.dims[0]->max, 128);
  ASSERT_EQ(m.inputs.size(), 1u);
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.values[m.inputs[0]]->name, "x");
  EXPECT_EQ(m.values[m.outputs[0]]->name, "y");
  const fb::ValueT& x = *m.values[m.inputs[0]];
  ASSERT_EQ(x.shape.size(), 3u);
  EXPECT_EQ(x.shape[0].value(), 1);
  EXPECT_EQ(x.shape[0].dim(), -1);
  EXPECT_EQ(x.shape[1].value(), 1);
  EXPECT_EQ(x.shape[1].dim(), 0);
  EXPECT_EQ(x.shape[2].value(), 64);
  // 9 nodes per block: the template's 20 less the four head permutes and four head
  // reshapes its attention absorbs, the k and v projections packed into q's and, on the
  // host, the GELU fused into the FFN's first linear (builder/rewrite.h).
  EXPECT_EQ(m.instructions.size(), 18u);
  ASSERT_EQ(m.segments.size(), 1u);
  EXPECT_EQ(m.segments[0]->backend, "cpu");
  EXPECT_EQ(m.segments[0]->num_nodes, 18u);
  for (const auto& ins : m.instructions) {
    EXPECT_EQ(ins->kind, fb::InstructionKind::Kernel);
    EXPECT_EQ(ins->segment, 0);
  }
  // The attention reads one packed projection [1, S, 3 x H x Dh] as it lies: no head split,
  // no permuted copy, no separate k and v products.
  EXPECT_EQ(find_value(m, "blocks.0.attn.q.bhsd"), nullptr);
  EXPECT_EQ(find_value(m, "blocks.0.attn.q.heads"), nullptr);
  EXPECT_EQ(find_value(m, "blocks.0.attn.k.out"), nullptr);
  const fb::ValueT* qkv = find_value(m, "blocks.0.attn.q.out#qkv");
  ASSERT_NE(qkv, nullptr);
  ASSERT_EQ(qkv->shape.size(), 3u);
  EXPECT_EQ(qkv->shape[1].dim(), 0);        // S
  EXPECT_EQ(qkv->shape[2].value(), 3 * 64);  // q | k | v
  ASSERT_EQ(m.planned_buffers.size(), 1u);
  EXPECT_EQ(m.planned_buffers[0]->device->type(), fb::DeviceType::CPU);
  // 12 per block (q, k and v's six weights and biases stored as one stacked weight and
  // bias), and constants of equal bytes stored once: each block's four random weights (8),
  // then the zero biases of three widths and the unit layer-norm scales, shared by both (4).
  EXPECT_EQ(p.constants.size(), 12u);
}

TEST(Transformer, WeightNamesFollowTheDocumentedScheme) {
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(1)));
  std::set<std::string> names;
  for (const ir::Constant& c : model.graph().constants) names.insert(c.name);
  for (std::string n : {"ln1.weight", "ln1.bias", "attn.q.weight", "attn.q.bias", "attn.k.weight",
                        "attn.k.bias", "attn.v.weight", "attn.v.bias", "attn.o.weight", "attn.o.bias",
                        "ln2.weight", "ln2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight",
                        "mlp.fc2.bias"}) {
    EXPECT_TRUE(names.contains("blocks.0." + n)) << n;
  }
  const ir::Constant* fc1 = model.graph().find_constant("blocks.0.mlp.fc1.weight");
  ASSERT_NE(fc1, nullptr);
  EXPECT_EQ(fc1->shape, (std::vector<int64_t>{256, 64}));
}

TEST(Transformer, LayerNormWeightsAreOnesAndBiasesZeros) {
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(1)));
  auto floats = [&](const std::string& name) {
    const ir::Constant* c = model.graph().find_constant(name);
    std::vector<float> v(c->bytes.size() / 4);
    std::memcpy(v.data(), c->bytes.data(), c->bytes.size());
    return v;
  };
  for (float f : floats("blocks.0.ln1.weight")) ASSERT_EQ(f, 1.0f);
  for (float f : floats("blocks.0.attn.q.bias")) ASSERT_EQ(f, 0.0f);
  auto w = floats("blocks.0.attn.q.weight");
  double sum = 0, sq = 0;
  for (float f : w) {
    sum += f;
    sq += double(f) * f;
  }
  double mean = sum / w.size(), sd = std::sqrt(sq / w.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.001);
}

TEST(Transformer, PerBlockFfnWidths) {
  TransformerOptions o = small(2);
  o.ffn_per_block = {32, 96};
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(o));
  EXPECT_EQ(model.graph().find_constant("blocks.1.mlp.fc1.weight")->shape, (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(model.graph().find_constant("blocks.0.mlp.fc2.weight")->shape, (std::vector<int64_t>{64, 32}));
}

// fused_attention = false marks every attention node fused=false (the score-keeping CUDA
// path); the default leaves the attribute out (fused where the kernel can).
TEST(Transformer, UnfusedAttentionMarksEveryAttentionNode) {
  for (bool fused : {true, false}) {
    TransformerOptions o = small(2);
    o.fused_attention = fused;
    ASSERT_OK_AND_ASSIGN(Model model, make_transformer(o));
    int attention_nodes = 0;
    for (const ir::Node& n : model.graph().methods.at(0).nodes) {
      if (n.op != "scaled_dot_product_attention") continue;
      ++attention_nodes;
      auto it = n.attrs.find("fused");
      if (fused) {
        EXPECT_EQ(it, n.attrs.end());
      } else {
        ASSERT_NE(it, n.attrs.end());
        EXPECT_EQ(std::get<bool>(it->second), false);
      }
    }
    EXPECT_EQ(attention_nodes, 2);
  }
}

TEST(Transformer, NoReusePlanArenaIsTheSumOfTensorSizes) {
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(small(2)));
  BuildOptions opts;
  opts.no_reuse = true;
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model, opts));
  expect_plans_valid(built.program());
  const fb::MethodT& m = *built.program().methods[0];
  ASSERT_OK_AND_ASSIGN(auto buffers, planning::collect_buffer_tensors(m));
  ASSERT_EQ(buffers.size(), 1u);
  uint64_t sum = 0;
  for (const auto& t : buffers[0].lifetimes) sum += (t.size_bytes + 63) / 64 * 64;
  EXPECT_EQ(m.planned_buffers[0]->size_bytes, sum);
  auto plans = built.plans();
  EXPECT_EQ(plans[0].planner, "no-reuse");
  EXPECT_EQ(plans[0].planned_bytes, sum);
  // And reuse really saves memory on this graph.
  ASSERT_OK_AND_ASSIGN(BuiltProgram reused, build_program(model));
  EXPECT_LT(reused.plans()[0].planned_bytes, sum / 4);
}

TEST(Transformer, CudaPartitionIsOneDelegateWithCopiesAround) {
  TransformerOptions o = small(2);
  o.partition = "cuda";
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(o));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(model));
  expect_plans_valid(built.program());
  const fb::MethodT& m = *built.program().methods[0];
  ASSERT_EQ(m.segments.size(), 1u);
  EXPECT_EQ(m.segments[0]->backend, "cuda");
  EXPECT_EQ(m.segments[0]->num_nodes, 20u);  // 10 per block as it runs
  ASSERT_EQ(m.instructions.size(), 3u);
  EXPECT_EQ(m.instructions[0]->kind, fb::InstructionKind::Copy);
  EXPECT_EQ(m.instructions[1]->kind, fb::InstructionKind::Delegate);
  EXPECT_EQ(m.instructions[2]->kind, fb::InstructionKind::Copy);
  ASSERT_EQ(m.planned_buffers.size(), 2u);
  EXPECT_EQ(m.planned_buffers[1]->device->type(), fb::DeviceType::CUDA);
  EXPECT_EQ(built.plans().size(), 2u);
  ASSERT_OK_AND_ASSIGN(auto bytes, built.serialize());
  ASSERT_OK_AND_ASSIGN(auto file, format::ProgramFile::from_bytes(std::move(bytes)));
  EXPECT_EQ(file.program().methods()->Get(0)->segments()->size(), 1u);
}

TEST(Transformer, RejectsBadOptions) {
  TransformerOptions o = small(1);
  o.heads = 5;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "d_model 64 is not divisible by heads 5");
  o = small(1);
  o.layers = 0;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "layers must be > 0, got 0");
  o = small(1);
  o.ffn = -3;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "ffn must be > 0");
  o = small(1);
  o.max_seq = 0;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "max_seq must be > 0");
  o = small(1);
  o.d_model = 0;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "d_model must be > 0");
  o = small(1);
  o.heads = 0;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "heads must be > 0");
  o = small(2);
  o.ffn_per_block = {8};
  EXPECT_ERROR_CONTAINS(make_transformer(o), "ffn_per_block has 1 entries for 2 layers");
  o = small(1);
  o.ffn_per_block = {0};
  EXPECT_ERROR_CONTAINS(make_transformer(o), "ffn_per_block[0] must be > 0");
  o = small(1);
  o.partition = "tpu";
  EXPECT_ERROR_CONTAINS(make_transformer(o), "unknown partition 'tpu' (accepted: cpu, cuda, cuda-per-block, cuda-per-op, engine, "
                        "engine-per-block, engine-cuda-interleaved)");
  o = small(1);
  o.weights = "random:abc";
  EXPECT_ERROR_CONTAINS(make_transformer(o), "expected random:SEED");
  o = small(1);
  o.weights = "/nonexistent/w.safetensors";
  EXPECT_ERROR_CONTAINS(make_transformer(o), "/nonexistent/w.safetensors");
}

// dtype bf16: x, y, every weight and every value in bf16, weights rounded from the same
// random stream as f32; half the planned bytes of f32. Only the CUDA kernels compute in
// bf16, so a model that would run on the host is refused, as are the attention settings
// without a bf16 kernel.
TEST(Transformer, Bf16ModelHoldsEveryTensorInBf16) {
  TransformerOptions o = small(2, "cuda");
  o.heads = 1;  // head dim 64, the fused kernel's
  ASSERT_OK_AND_ASSIGN(Model f32, make_transformer(o));
  o.dtype = DType::BF16;
  ASSERT_OK_AND_ASSIGN(Model bf16, make_transformer(o));
  for (const ir::Constant& c : bf16.graph().constants) {
    EXPECT_EQ(c.dtype, DType::BF16) << c.name;
    const ir::Constant* same = f32.graph().find_constant(c.name);
    ASSERT_NE(same, nullptr);
    ASSERT_EQ(c.bytes.size() * 2, same->bytes.size());
    for (size_t i = 0; i < c.bytes.size() / 2; i += 97) {
      float x = 0;
      uint16_t bits = 0;
      std::memcpy(&x, same->bytes.data() + 4 * i, 4);
      std::memcpy(&bits, c.bytes.data() + 2 * i, 2);
      ASSERT_EQ(bits, f32_to_bf16_bits(x)) << c.name << "[" << i << "]";
    }
  }
  ASSERT_OK_AND_ASSIGN(BuiltProgram built_f32, build_program(f32));
  ASSERT_OK_AND_ASSIGN(BuiltProgram built, build_program(bf16));
  expect_plans_valid(built.program());
  const fb::MethodT& m = *built.program().methods[0];
  for (const auto& v : m.values) {
    // A planned scratch holds bytes (f32 words) of whatever its segment puts there.
    if (v->name.ends_with("#scratch")) continue;
    EXPECT_EQ(v->dtype, fb::DType::BF16) << v->name;
  }
  ASSERT_EQ(built.plans().size(), built_f32.plans().size());
  // Every tensor halves; the linears' cuBLASLt workspace in the segments' planned scratch
  // (f32 partial sums in either dtype, kernels/workspace.h) does not: bf16 holds at most
  // the f32 plan and at least half of it.
  for (size_t i = 0; i < built.plans().size(); ++i) {
    EXPECT_LE(built.plans()[i].planned_bytes, built_f32.plans()[i].planned_bytes);
    EXPECT_GE(built.plans()[i].planned_bytes * 2, built_f32.plans()[i].planned_bytes);
  }
}

TEST(Transformer, Bf16RefusesWhatHasNoBf16Kernel) {
  TransformerOptions o = small(1, "cpu");
  o.heads = 1;
  o.dtype = DType::BF16;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "dtype bf16 runs on the CUDA kernels only, but partition 'cpu'");
  o.partition = "engine";
  o.device = "cpu";
  EXPECT_ERROR_CONTAINS(make_transformer(o), "on device 'cpu' runs on the host");
  EXPECT_ERROR_CONTAINS(check_transformer_options(o), "dtype bf16");
  o = small(1, "cuda");
  o.heads = 1;
  o.dtype = DType::BF16;
  o.fused_attention = false;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "dtype bf16 needs fused attention");
  o.fused_attention = true;
  o.heads = 4;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "needs head dim 64 (the fused kernel's), but d_model 64 / heads 4 = 16");
  o.heads = 1;
  o.dtype = DType::I32;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "dtype i32 is not supported (f32, bf16 or f16)");
}

TEST(Transformer, SizeOverflowIsAnErrorNotACrash) {
  TransformerOptions o = small(1);
  o.d_model = int64_t{1} << 40;
  o.heads = 1;
  o.ffn = int64_t{1} << 40;
  EXPECT_ERROR_CONTAINS(make_transformer(o), "overflow");
}

TEST(Transformer, ProgressReportsEveryTensor) {
  TransformerOptions o = small(1);
  std::vector<size_t> done;
  uint64_t last_bytes = 0, total = 0;
  o.progress = [&](const WeightProgress& p) {
    EXPECT_EQ(p.stage, "generate");
    done.push_back(p.done_tensors);
    last_bytes = p.done_bytes;
    total = p.total_bytes;
  };
  ASSERT_OK_AND_ASSIGN(Model model, make_transformer(o));
  ASSERT_EQ(done.size(), 16u);
  EXPECT_EQ(done.back(), 16u);
  EXPECT_EQ(last_bytes, total);
  EXPECT_EQ(total, model.constants_bytes());
}

}  // namespace
}  // namespace planrt::builder
