// sp_attention on in-process worlds of 1 to 8 ranks on the visible GPUs, against attention over
// the whole sequence in fp32 (sp_attention_cases.cuh). Fresh random inputs every run, outputs
// poisoned first, three calls per case (the later ones over buffers earlier ones gathered into;
// the first call of a world is the one that sets its buffers and slots up); zig-zag and
// contiguous sharding, causal and full, the fused path on the copy engine and on SMs, the
// decomposed path, grouped-query heads, head_dim 64 and 128, bf16 and fp16.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/ops/sp_attention_cases.cuh"

namespace tt = tilelink::test;
using namespace tilelink::test::sp;

namespace {

class SpAttention : public tt::WorldSizeTest {};

TEST_P(SpAttention, MatchesAttentionOverTheWholeSequence) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const std::vector<SpCase> cases = {
      {DType::fp16, 1, 77, 2, 1, 64, true, SequenceSharding::contiguous, OpPath::fused, CommEngine::sm},
      {DType::bf16, 2, 90, 4, 2, 128, true, SequenceSharding::zigzag, OpPath::automatic, CommEngine::copy_engine},
      {DType::bf16, 1, 200, 8, 8, 128, false, SequenceSharding::contiguous, OpPath::decomposed, CommEngine::copy_engine},
      {DType::fp16, 2, 256, 4, 1, 128, true, SequenceSharding::zigzag, OpPath::fused, CommEngine::sm},
      {DType::bf16, 1, 384, 2, 2, 64, false, SequenceSharding::zigzag, OpPath::fused, CommEngine::copy_engine},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci)
    for (int call = 0; call < 3; ++call) {
      const SpCase& c = cases[ci];
      SCOPED_TRACE(describe(c) + ", call " + std::to_string(call));
      std::vector<RankResult> results(ranks());
      const uint64_t case_seed = tt::mix_seed(seed, ci, call);
      world().run([&](Context& ctx) { results[ctx.rank()] = run_rank(ctx, c, case_seed); });
      for (int r = 0; r < ranks(); ++r) {
        EXPECT_EQ(results[r].out.bad, 0) << "rank " << r << ": " << tt::describe(results[r].out);
        EXPECT_EQ(results[r].lse_bad, 0) << "rank " << r << ": lse entries off";
      }
    }
}

TEST_P(SpAttention, BadArgumentsAreRefusedOnEveryRank) {
  std::vector<std::string> errors(ranks());
  world().run([&](Context& ctx) {
    tilelink::SpAttentionArgs a;
    void* p = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&p, 1 << 16));
    a.q = a.k = a.v = p;
    a.out = p;
    a.batch = 1, a.local_len = 33, a.q_heads = 2, a.kv_heads = 1, a.head_dim = 128;  // odd: no zig-zag halves
    try {
      tilelink::sp_attention(ctx, a);
    } catch (const tilelink::Error& e) {
      errors[ctx.rank()] = e.what();
    }
    TL_CUDA_CHECK(cudaFree(p));
  });
  for (int r = 0; r < ranks(); ++r) EXPECT_NE(errors[r].find("must be even"), std::string::npos) << r << ": " << errors[r];
}

TILELINK_WORLD_SIZES(SpAttention);

}  // namespace
