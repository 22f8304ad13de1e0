// The attention rewrites (builder/rewrite.h) end to end on a GPU: the attention block of
// tests/runtime/attention_block.h on the cuda backend and in an engine, as written, with
// only the head permutes and reshapes absorbed, and with the packed projection, against the
// CPU's block as written (the CUDA attention at head dim 64 runs fused).
#include <gtest/gtest.h>

#include "planrt/backends/cuda.h"
#include "planrt/backends/engine.h"
#include "runtime/attention_block.h"
#include "support/gpu.h"

namespace planrt {
namespace {

using attention_block::Rewritten;

TEST(AttentionRewriteCuda, EveryVariantOnCudaAndInAnEngineAgreesWithTheCpu) {
  PLANRT_REQUIRE_GPU_OR_SKIP();
  ASSERT_TRUE(register_cuda_backend().ok());
  ASSERT_TRUE(register_engine_backend().ok());
  for (int64_t batch : {1, 3}) {
    for (int64_t seq : {1, 33}) {
      auto want = attention_block::run("cpu", Rewritten::Nothing, batch, seq);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      for (const char* backend : {"cuda", "engine"}) {
        for (Rewritten r : {Rewritten::Nothing, Rewritten::HeadsOnly, Rewritten::Everything}) {
          SCOPED_TRACE(::testing::Message() << backend << " variant " << static_cast<int>(r) << " batch " << batch
                                            << " S " << seq);
          auto got = attention_block::run(backend, r, batch, seq);
          ASSERT_TRUE(got.ok()) << got.status().to_string();
          EXPECT_LT(attention_block::relative_error(*got, *want), 1e-5);
        }
      }
    }
  }
}

}  // namespace
}  // namespace planrt
