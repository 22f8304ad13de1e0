// The attention rewrites (builder/rewrite.h) end to end: an attention block written as the
// template and exporters write it (three projections, head split by reshape and permute,
// attention, merge, output projection) computes the same output whether the builder packs
// the projections and absorbs the head reshapes and permutes, absorbs only those (the q
// projection is also a method output, so it cannot be packed), or leaves the block as
// written (the attention's output is a method output too). On the CPU here, on a GPU in
// tests/runtime/cuda/attention_rewrite_cuda_test.cpp.
#include <gtest/gtest.h>

#include "runtime/attention_block.h"

namespace planrt {
namespace {

using attention_block::Rewritten;

TEST(AttentionRewrite, PackedAndUnpackedBlocksAgreeWithTheBlockAsWritten) {
  for (int64_t batch : {1, 3}) {
    for (int64_t seq : {1, 7, 33}) {
      SCOPED_TRACE(::testing::Message() << "batch " << batch << " S " << seq);
      auto written = attention_block::run("cpu", Rewritten::Nothing, batch, seq);
      ASSERT_TRUE(written.ok()) << written.status().to_string();
      for (Rewritten r : {Rewritten::HeadsOnly, Rewritten::Everything}) {
        auto got = attention_block::run("cpu", r, batch, seq);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        EXPECT_LT(attention_block::relative_error(*got, *written), 1e-6);
      }
    }
  }
}

TEST(AttentionRewrite, TheProgramHoldsWhatEachVariantRuns) {
  // As written: 3 projections, 4 reshapes, 4 permutes, attention, output projection; the
  // permutes absorbed: 3 + 4 + 1 + 1; everything: 1 packed projection, attention, output.
  const std::pair<Rewritten, uint32_t> expected[] = {
      {Rewritten::Nothing, 13u}, {Rewritten::HeadsOnly, 5u}, {Rewritten::Everything, 3u}};
  for (const auto& [r, count] : expected) {
    Result<uint32_t> n = attention_block::nodes("cpu", r);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    EXPECT_EQ(*n, count) << static_cast<int>(r);
  }
}

}  // namespace
}  // namespace planrt
