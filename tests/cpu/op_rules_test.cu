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

TEST(OpRules, GemmRsFusedRingPushOnEveryReferenceShapeBeyondTwoGpus) {
  const int64_t shapes[][3] = {{8192, 4096, 1376}, {8192, 4096, 1792}, {8192, 3584, 1792},
                               {8192, 4608, 4608}, {8192, 8192, 3584}, {8192, 8192, 3696}};
  for (const Topology& t : {kFourGpus, kEightSharing}) {
    for (const auto& s : shapes) EXPECT_EQ(tilelink::gemm_rs_choose_path(t, rs(s[0], s[1], s[2])), ReducePath::fused);
    const auto sched = tilelink::gemm_rs_choose_algo(t);
    EXPECT_EQ(sched.algo, RsAlgo::ring);
    EXPECT_EQ(sched.mode, tilelink::CommMode::push);
  }
  // One rank: the GEMM alone, on cuBLASLt (faster than the engine on every shape measured).
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kOneRank, rs(64, 64, 64)), ReducePath::decomposed);
  EXPECT_EQ(tilelink::gemm_ar_choose_path(kOneRank, ar(8192, 4096, 4096)), ReducePath::decomposed);
  // Too little work per rank to hide the reducer's fixed costs: GEMM, then the collective.
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(64, 4096, 1376)), ReducePath::decomposed);
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(2048, 1024, 512)), ReducePath::decomposed);
  // TP2 down-projections from PyTorch: the split decomposed path (below), not fused.
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(16384, 8192, 14336)), ReducePath::decomposed);
  // Ranks sharing a GPU: fused at any K (no NCCL there; the reduction kernel runs either way).
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kEightSharing, rs(8192, 4096, 14336)), ReducePath::fused);
}

TEST(OpRules, AgGemmFusedOnlyWhereTheGemmHidesTheGather) {
  auto ag = [](int64_t m, int64_t n, int64_t k, const Topology& t) {
    return tilelink::ag_gemm_choose_path(t, {DType::bf16, nullptr, nullptr, nullptr, m / t.world, n, k});
  };
  using tilelink::OpPath;
  // 2 H200s: the decomposed path split by rank (per-rank GEMMs beside copy-engine pulls) beat
  // fused push/sm on every shape where the split pays (>= 4 MiB received per rank: M = 8192,
  // 2048, and the larger M = 512 ones), TP2 LLaMA MLP widths included.
  for (const auto& s : {std::array<int64_t, 3>{8192, 1376, 4096}, {8192, 1792, 4096}, {8192, 3584, 8192},
                        {8192, 6656, 16384}, {8192, 3696, 8192}, {2048, 1376, 4096}, {2048, 3584, 8192},
                        {512, 3584, 8192}, {512, 6656, 16384}, {8192, 14336, 4096}, {16384, 28672, 8192}})
    EXPECT_EQ(ag(s[0], s[1], s[2], kTwoGpus), OpPath::decomposed) << s[0] << "x" << s[1] << "x" << s[2];
  // Smaller pieces, the earlier rule: fused needs a gathered M >= 2048, so NCCL + cuBLAS here
  // (fused won M = 512, N/8 = 1376 once, 1.06x against 0.90x: a 40 us op, not a rule to bend).
  EXPECT_EQ(ag(512, 1376, 4096, kTwoGpus), OpPath::decomposed);
  EXPECT_EQ(ag(128, 3584, 8192, kTwoGpus), OpPath::decomposed);
  // More ranks (unmeasured for the split path): fused where the GEMM hides the gather. 4 H200s:
  // fused won every M = 8192 reference shape, N/8 = 1376 included (1.12x); wide N pays at 8.
  EXPECT_EQ(ag(8192, 1376, 4096, kFourGpus), OpPath::fused);
  EXPECT_EQ(ag(8192, 12288, 4096, Topology{8, 1, 132}), OpPath::fused);
  // Ranks sharing a GPU: the whole gather, then cuBLAS; one rank: cuBLASLt alone.
  EXPECT_EQ(ag(8192, 3584, 8192, kEightSharing), OpPath::decomposed);
  EXPECT_EQ(ag(8192, 3584, 8192, kOneRank), OpPath::decomposed);
}

TEST(OpRules, DecomposedPathsSplitTheGemmByRankWhereTheOverlapPaysItsFixedCosts) {
  using tilelink::ops::ag_gemm_split_decomposed;
  using tilelink::ops::gemm_rs_split_decomposed;
  auto ag = [](int64_t m, int64_t n, int64_t k, const Topology& t) {
    return tilelink::AgGemmArgs{DType::bf16, nullptr, nullptr, nullptr, m / t.world, n, k};
  };
  // 2 H200s, AG: split from 4 MiB received per rank (M = 512, N/8 = 3584, K = 8192: 1.05x against
  // 0.95x unsplit); not at 2 MiB nor with 0.8 MiB (944 x 824 x 856 lost: 0.68x).
  EXPECT_TRUE(ag_gemm_split_decomposed(kTwoGpus, ag(512, 3584, 8192, kTwoGpus)));
  EXPECT_TRUE(ag_gemm_split_decomposed(kTwoGpus, ag(8192, 14336, 4096, kTwoGpus)));
  EXPECT_FALSE(ag_gemm_split_decomposed(kTwoGpus, ag(512, 1376, 4096, kTwoGpus)));
  EXPECT_FALSE(ag_gemm_split_decomposed(kTwoGpus, ag(944, 824, 856, kTwoGpus)));
  // A GEMM of a few hundred MFLOP is not worth W launches, however many bytes move.
  EXPECT_FALSE(ag_gemm_split_decomposed(kTwoGpus, ag(8192, 8, 1024, kTwoGpus)));
  // RS: every reference shape and the TP2 down-projection; the comm-heavy 14530 x 1104 x 272
  // (8.7 GFLOP, 1.20x); not 836 x 3416 x 9600 (2.8 MiB sent, lost 0.93x).
  EXPECT_TRUE(gemm_rs_split_decomposed(kTwoGpus, rs(8192, 4096, 1376)));
  EXPECT_TRUE(gemm_rs_split_decomposed(kTwoGpus, rs(8192, 4096, 7168)));
  EXPECT_TRUE(gemm_rs_split_decomposed(kTwoGpus, rs(14530, 1104, 272)));
  EXPECT_FALSE(gemm_rs_split_decomposed(kTwoGpus, rs(836, 3416, 9600)));
  // Only with one GPU per rank (ranks sharing a GPU have their own decomposed paths).
  EXPECT_FALSE(ag_gemm_split_decomposed(kEightSharing, ag(8192, 3584, 8192, kEightSharing)));
  EXPECT_FALSE(gemm_rs_split_decomposed(kEightSharing, rs(8192, 4096, 3584)));
  EXPECT_FALSE(ag_gemm_split_decomposed(kOneRank, ag(8192, 3584, 8192, kOneRank)));
  EXPECT_TRUE(ag_gemm_split_decomposed(kFourGpus, ag(8192, 3584, 8192, kFourGpus)));
  // Its copies read the peers' heaps: not where peers are reached through NVSHMEM put-with-signal.
  Topology two_nodes = kTwoGpus;
  two_nodes.peers_load_store = false;
  EXPECT_FALSE(ag_gemm_split_decomposed(two_nodes, ag(8192, 14336, 4096, two_nodes)));
  EXPECT_FALSE(gemm_rs_split_decomposed(two_nodes, rs(8192, 4096, 7168)));
}

// Peers only through NVSHMEM put-with-signal: NCCL + cuBLAS with a GPU per rank (the fused gather
// over NVSHMEM is unmeasured across nodes), the fused push where ranks share a GPU (no NCCL there).
TEST(OpRules, GemmRsWithoutLoadStorePeersTakesNcclOrTheNvshmemFullMeshPush) {
  for (Topology t : {kTwoGpus, kFourGpus, kEightSharing}) {
    t.peers_load_store = false;
    const tilelink::RsSchedule s = tilelink::gemm_rs_choose_algo(t);
    EXPECT_EQ(s.algo, tilelink::RsAlgo::full_mesh);
    EXPECT_EQ(s.mode, tilelink::CommMode::push);
    const tilelink::ReducePath want =
        t.max_ranks_per_gpu > 1 ? tilelink::ReducePath::fused : tilelink::ReducePath::decomposed;
    for (const auto& a : {rs(8192, 4096, 1376), rs(8 * t.world, 8, 8), rs(4096, 8192, 7168)})
      EXPECT_EQ(tilelink::gemm_rs_choose_path(t, a), want) << t.world << " ranks, M " << a.m;
  }
}

TEST(OpRules, AgGemmWithoutLoadStorePeersTakesNcclOrTheNvshmemPush) {
  using tilelink::OpPath;
  auto ag = [](int64_t m, int64_t n, int64_t k, const Topology& t) {
    return tilelink::AgGemmArgs{DType::bf16, nullptr, nullptr, nullptr, m / t.world, n, k};
  };
  for (Topology t : {kTwoGpus, kFourGpus, kEightSharing}) {
    t.peers_load_store = false;
    const OpPath want = t.max_ranks_per_gpu > 1 ? OpPath::fused : OpPath::decomposed;
    for (const auto& a : {ag(8192, 14336, 4096, t), ag(8 * t.world, 8, 8, t), ag(4096, 3584, 8192, t)})
      EXPECT_EQ(tilelink::ag_gemm_choose_path(t, a), want) << t.world << " ranks, M " << a.m_per_rank * t.world;
  }
}

// Over NVSHMEM the all-reduce is the two-shot push, at every M (one_shot reads peers' partials).
TEST(OpRules, GemmArWithoutLoadStorePeersTakesNcclOrTheNvshmemTwoShotPush) {
  auto ar = [](int64_t m) { return tilelink::GemmArArgs{DType::bf16, nullptr, nullptr, nullptr, m, 8192, 3584}; };
  for (Topology t : {kTwoGpus, kFourGpus, kEightSharing}) {
    t.peers_load_store = false;
    const ReducePath want = t.max_ranks_per_gpu > 1 ? ReducePath::fused : ReducePath::decomposed;
    for (int64_t m : {int64_t(1), int64_t(129), int64_t(16 * t.world), int64_t(8192)}) {
      EXPECT_EQ(tilelink::gemm_ar_choose_algo(t, ar(m)), tilelink::ArAlgo::two_shot) << t.world << " ranks, M " << m;
      EXPECT_EQ(tilelink::gemm_ar_choose_path(t, ar(m)), want) << t.world << " ranks, M " << m;
    }
  }
}

TEST(OpRules, GemmRsFusedOnlyWhereItsTrafficMatchesTheGemmOnTwoGpus) {
  // Where the split pays on 2 GPUs: fused ring/push only for (W-1)/(W K) bytes per flop in
  // [1/4096, 1/2048], i.e. K per rank in [1024, 2048] (K = 1376: 1.46x against split 1.38x).
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(8192, 4096, 1376)), ReducePath::fused);
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(8192, 3584, 1792)), ReducePath::fused);
  for (const auto& s : {std::array<int64_t, 3>{8192, 4608, 4608}, {8192, 8192, 3584}, {8192, 4096, 7168},
                        {786, 20976, 2304}, {15134, 20384, 360}, {3036, 11928, 752}})
    EXPECT_EQ(tilelink::gemm_rs_choose_path(kTwoGpus, rs(s[0], s[1], s[2])), ReducePath::decomposed)
        << s[0] << "x" << s[1] << "x" << s[2];
  // More ranks: the earlier rule (fused on every reference shape).
  EXPECT_EQ(tilelink::gemm_rs_choose_path(kFourGpus, rs(8192, 4608, 4608)), ReducePath::fused);
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

TEST(OpRules, MoeGatherPullsPeersTokensOnceWhenSeveralExpertsReadThem) {
  EXPECT_FALSE(tilelink::ops::moe_pull_tokens_first(1)) << "top-1: every token is read once anyway";
  for (int topk : {2, 4, 6, 8}) EXPECT_TRUE(tilelink::ops::moe_pull_tokens_first(topk)) << "top-" << topk;
}
