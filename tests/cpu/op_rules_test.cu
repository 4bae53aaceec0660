// The automatic choices of ag_gemm, gemm_rs and gemm_ar (docs/OPS.md), on the topologies and shapes they
// were measured on (docs/PERF.md): a change to a threshold shows up here, next to its evidence.
#include <gtest/gtest.h>

#include <array>

#include "ops/common/rules.hpp"
#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"

namespace {

using tilelink::ArAlgo;
using tilelink::DType;
using tilelink::ReducePath;
using tilelink::RsAlgo;
using tilelink::Topology;

constexpr Topology kOneRank{1, 1, 132};
constexpr Topology kTwoGpus{2, 1, 132};
constexpr Topology kFourGpus{4, 1, 132};
constexpr Topology kEightSharing{8, 8, 16};  // 8 in-process ranks on one H200

tilelink::GemmRsArgs rs(int64_t m, int64_t n, int64_t k) { return {DType::bf16, nullptr, nullptr, nullptr, m, n, k}; }
tilelink::GemmArArgs ar(int64_t m, int64_t n, int64_t k) { return {DType::bf16, nullptr, nullptr, nullptr, m, n, k}; }

TEST(OpRules, GemmRsFusedRingPushOnEveryReferenceShape) {
  const int64_t shapes[][3] = {{8192, 4096, 1376}, {8192, 4096, 1792}, {8192, 3584, 1792},
                               {8192, 4608, 4608}, {8192, 8192, 3584}, {8192, 8192, 3696}};
  for (const Topology& t : {kTwoGpus, kFourGpus, kEightSharing}) {
    for (const auto& s : shapes) EXPECT_EQ(tilelink::gemm_rs_choose_path(t, rs(s[0], s[1], s[2])), ReducePath::fused);
    const auto sched = tilelink::gemm_rs_choose_algo(t);
    EXPECT_EQ(sched.algo, RsAlgo::ring);
    EXPECT_EQ(sched.mode, tilelink::CommMode::push);
  }
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kOneRank, rs(64, 64, 64)), ReducePath::fused);
  // Too little work per rank to hide the reducer's fixed costs: GEMM, then the collective.
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(64, 4096, 1376)), ReducePath::decomposed);
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(2048, 1024, 512)), ReducePath::decomposed);
  // TP2 down-projections from PyTorch: fused won at K = 7168 per rank (1.05x), lost at 14336 (0.79x).
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(8192, 4096, 7168)), ReducePath::fused);
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(16384, 8192, 14336)), ReducePath::decomposed);
  // Ranks sharing a GPU: fused at any K (no NCCL there; the reduction kernel runs either way).
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kEightSharing, rs(8192, 4096, 14336)), ReducePath::fused);
}

TEST(OpRules, AgGemmFusedOnlyWhereTheGemmHidesTheGather) {
  auto ag = [](int64_t m, int64_t n, int64_t k, const Topology& t) {
    return tilelink::ag_gemm_choose_path(t, {DType::bf16, nullptr, nullptr, nullptr, m / t.world, n, k});
  };
  using tilelink::OpPath;
  // 2 H200s (docs/PERF.md, 2026-11-29 evening): fused won every M = 8192 shape and M = 2048 for
  // N/8 >= 3584; NCCL + cuBLAS won the smaller N at M = 2048 and M <= 512, even at 110 GFLOP.
  for (const auto& s : {std::array<int64_t, 3>{8192, 1376, 4096}, {8192, 1792, 4096}, {8192, 3584, 8192},
                        {8192, 6656, 16384}, {8192, 3696, 8192}, {2048, 3584, 8192}, {2048, 6656, 16384},
                        {2048, 3696, 8192}})
    EXPECT_EQ(ag(s[0], s[1], s[2], kTwoGpus), OpPath::fused) << s[0] << "x" << s[1] << "x" << s[2];
  for (const auto& s : {std::array<int64_t, 3>{2048, 1376, 4096}, {2048, 1792, 4096}, {512, 6656, 16384},
                        {512, 3584, 8192}, {128, 3584, 8192}})
    EXPECT_EQ(ag(s[0], s[1], s[2], kTwoGpus), OpPath::decomposed) << s[0] << "x" << s[1] << "x" << s[2];
  // TP2 LLaMA MLP widths from PyTorch: the gather is a few percent of the GEMM, fused lost
  // (0.94-0.95x): decomposed. More ranks move more per flop, so wider N still pays at 8.
  EXPECT_EQ(ag(8192, 14336, 4096, kTwoGpus), OpPath::decomposed);
  EXPECT_EQ(ag(16384, 28672, 8192, kTwoGpus), OpPath::decomposed);
  EXPECT_EQ(ag(8192, 8192, 4096, kTwoGpus), OpPath::fused);
  EXPECT_EQ(ag(8192, 12288, 4096, Topology{8, 1, 132}), OpPath::fused);
  // 4 H200s: fused won every M = 8192 reference shape, N/8 = 1376 included (1.12x).
  EXPECT_EQ(ag(8192, 1376, 4096, kFourGpus), OpPath::fused);
  // Ranks sharing a GPU: the whole gather, then cuBLAS; one rank: the engine.
  EXPECT_EQ(ag(8192, 3584, 8192, kEightSharing), OpPath::decomposed);
  EXPECT_EQ(ag(128, 128, 128, kOneRank), OpPath::fused);
}

TEST(OpRules, ReductionSmsBalanceTrafficAgainstTheGemm) {
  // One GPU per rank: 32 SMs at short K (1.38-1.48x on 2 GPUs), 16 at long K (1.04-1.23x).
  EXPECT_EQ(tilelink::ops::default_reduce_sms(kTwoGpus, 1376), 32);
  EXPECT_EQ(tilelink::ops::default_reduce_sms(kTwoGpus, 1792), 32);
  EXPECT_EQ(tilelink::ops::default_reduce_sms(kTwoGpus, 3584), 16);
  EXPECT_EQ(tilelink::ops::default_reduce_sms(kTwoGpus, 4608), 16);
  // More ranks move more of the output per flop: K is scaled to 2-rank traffic (x W / (2(W-1))).
  EXPECT_EQ(tilelink::ops::default_reduce_sms(kFourGpus, 2560), 32);  // 2560 * 4/6 = 1707
  EXPECT_EQ(tilelink::ops::default_reduce_sms(kFourGpus, 3584), 16);  // 2389
  // Ranks sharing a GPU: a slice of the rank's share.
  EXPECT_EQ(tilelink::ops::default_reduce_sms(kEightSharing, 1376), 2);
  // Never more than a quarter of the SMs the rank has.
  EXPECT_EQ(tilelink::ops::default_reduce_sms(Topology{2, 1, 64}, 1376), 16);
}

TEST(OpRules, GemmArOneShotOnlyWhileThePullIsSmall) {
  // 2 GPUs, N 8192: fused one_shot at M = 128 (2 MiB pulled per rank, 1.19x), cuBLAS + NCCL above.
  EXPECT_EQ(tilelink::gemm_ar_choose_path(kTwoGpus, ar(128, 8192, 3584)), ReducePath::fused);
  EXPECT_EQ(tilelink::gemm_ar_choose_algo(kTwoGpus, ar(128, 8192, 3584)), ArAlgo::one_shot);
  for (int64_t m : {256, 512, 1024, 2048})
    EXPECT_EQ(tilelink::gemm_ar_choose_path(kTwoGpus, ar(m, 8192, 3584)), ReducePath::decomposed) << m;
  // 4 GPUs: M = 128 would pull 6 MiB per rank (measured 0.79x): decomposed at every M.
  for (int64_t m : {128, 256, 2048})
    EXPECT_EQ(tilelink::gemm_ar_choose_path(kFourGpus, ar(m, 8192, 3584)), ReducePath::decomposed) << m;
  // 8 ranks sharing a GPU: two_shot from 16 rows per rank (1.16x at M = 128), decomposed below.
  EXPECT_EQ(tilelink::gemm_ar_choose_path(kEightSharing, ar(128, 8192, 3584)), ReducePath::fused);
  EXPECT_EQ(tilelink::gemm_ar_choose_algo(kEightSharing, ar(128, 8192, 3584)), ArAlgo::two_shot);
  EXPECT_EQ(tilelink::gemm_ar_choose_path(kEightSharing, ar(64, 8192, 3584)), ReducePath::decomposed);
  EXPECT_EQ(tilelink::gemm_ar_choose_algo(kEightSharing, ar(130, 8192, 3584)), ArAlgo::two_shot)
      << "rows that do not split evenly: blocks of 16 and 17 rows";
  EXPECT_EQ(tilelink::gemm_ar_choose_algo(kEightSharing, ar(127, 8192, 3584)), ArAlgo::one_shot);
}

// 3 ranks on 2 GPUs (two share one): every rank sees the world's sharing, so the rank alone on
// its GPU takes the shared-GPU choices with the others — never NCCL on one rank and tilelink's
// gather on the rest.
TEST(OpRules, UnevenSharingTakesTheSharedGpuChoices) {
  constexpr Topology kThreeOnTwo{3, 2, 66};
  EXPECT_EQ(tilelink::ag_gemm_choose_path(kThreeOnTwo, {DType::bf16, nullptr, nullptr, nullptr, 1, 3584, 2048}),
            tilelink::OpPath::decomposed);
  EXPECT_EQ(tilelink::ag_gemm_choose_path(kThreeOnTwo, {DType::bf16, nullptr, nullptr, nullptr, 8192, 3584, 8192}),
            tilelink::OpPath::decomposed);
  EXPECT_EQ(tilelink::gemm_ar_choose_algo(kThreeOnTwo, ar(48, 8192, 3584)), ArAlgo::two_shot);
  EXPECT_EQ(tilelink::ops::default_reduce_sms(kThreeOnTwo, 1376), 66 / 7);
}

}  // namespace
