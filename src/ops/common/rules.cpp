// src/ops/common/rules.cpp — the automatic choices of ag_gemm, gemm_rs and gemm_ar, each next to the
// measurements it was derived from (docs/OPS.md, docs/PERF.md). Pure host logic with no CUDA
// calls, so tests/cpu/op_rules_test.cu checks it on machines without a GPU.
#include "ops/common/rules.hpp"

#include <algorithm>

namespace tilelink {

// ---- ag_gemm -----------------------------------------------------------------------------------
// Rule (docs/OPS.md), from the H200 measurements (docs/PERF.md, 2026-11-29 evening, after the gather's
// chunking and batched stream writes):
//  * one GPU per rank, 2 H200s, 20 shapes (M = 128 ... 8192, the five reference N/8 x K),
//    fused push/sm against NCCL all-gather + cuBLAS: won on every M = 8192 shape (1.02-1.13x,
//    down to 92 GFLOP per rank) and at M = 2048 for N/8 >= 3584 (1.04-1.23x, >= 120 GFLOP);
//    lost at M = 2048 for N/8 = 1376/1792 (0.89-0.93x, 23-30 GFLOP) and at M = 512 (0.89-0.97x,
//    even at 110 GFLOP: the engine is below cuBLAS at decode-sized M). At M = 128 it won once
//    (N/8 = 6656, K = 16384: 1.11x) and lost the rest (0.61-0.85x).
//    On 4 H200s fused won every M = 8192 shape (1.05-1.19x): each rank gathers W - 1 shards.
//    So: fused when the gathered M >= 2048 rows and GEMM flops per rank x (W - 1) >= 5e10 (the
//    one miss on 2 GPUs: M = 128, N/8 = 6656, K = 16384).
//  * ranks sharing a GPU (2 and 8 in-process ranks): the decomposed path (the whole gather by the
//    copy engines, then cuBLAS on the whole GPU) beat fused on all 10 shapes (0.82-0.97x of
//    copy + cuBLAS, fused 0.65-0.88x).
//  * one GPU per rank, wide layers (TP2 LLaMA MLPs from PyTorch, docs/PERF.md 2026-11-30 evening):
//    per-rank N = 14336 and 28672 lost fused (0.94-0.95x of F.linear + NCCL) while the decomposed
//    path matched it. There the gather is a few percent of the GEMM's time, so overlap can hide
//    little and any shortfall of the fused GEMM against cuBLAS shows: see overlap_can_pay.
namespace {
constexpr int64_t kAgFusedMinRows = 2048;
constexpr double kAgFusedMinFlopsTimesPeers = 5e10;

// A fused op can save at most the time of its collective, and its GEMM (the engine, on fewer SMs)
// may run a few percent slower than cuBLAS: fused pays only while the collective is a sizeable
// part of the GEMM. Bytes a rank moves per GEMM flop are (W - 1) / (W * D) for both AllGather-GEMM
// (D = N: each gathered row feeds N outputs) and GEMM-ReduceScatter (D = K: each output sums K
// products). An H200 does ~1900 bf16 flops per byte of NVLink, so 1 / 16384 bytes per flop is a
// collective of ~12% of the GEMM's time. Measured on 2 H200s: AG fused won at N = 3584-6656
// (>= 1/13312) and lost at 14336 and 28672; RS fused won at K = 7168 (1/14336, 1.05x) and lost at
// 14336 (0.79x).
constexpr double kMinCollectiveBytesPerFlop = 1.0 / 16384;
bool overlap_can_pay(int world, int64_t reuse_dim) {
  return double(world - 1) / (double(world) * double(reuse_dim)) >= kMinCollectiveBytesPerFlop;
}
}  // namespace

OpPath ag_gemm_choose_path(const Topology& topo, const AgGemmArgs& a) {
  if (topo.world == 1) return OpPath::fused;
  if (topo.max_ranks_per_gpu > 1) return OpPath::decomposed;
  const int64_t m = a.m_per_rank * topo.world;
  const double flops = 2.0 * double(m) * double(a.n) * double(a.k);
  return m >= kAgFusedMinRows && flops * (topo.world - 1) >= kAgFusedMinFlopsTimesPeers &&
                 overlap_can_pay(topo.world, a.n)
             ? OpPath::fused
             : OpPath::decomposed;
}

// ---- gemm_rs -----------------------------------------------------------------------------------
ReducePath gemm_rs_choose_path(const Topology& topo, const GemmRsArgs& a) {
  // Rule (docs/OPS.md), from the H200 measurements (docs/PERF.md):
  //  * one GPU per rank (2 H200s over NVLink): fused ring/push won on every reference shape
  //    with its default SMs (1.23-1.48x over cuBLAS + NCCL reduce-scatter at K <= 2048 per rank,
  //    1.04-1.23x above);
  //  * ranks sharing a GPU (8 in-process ranks): fused ring/push won on every shape (1.28-1.42x
  //    over the GEMM followed by the same reduction);
  //  * 4 H200s: the same choice won again (1.08-1.48x);
  //  * in both, below ~10 GFLOP per rank a GEMM is too short to hide the reducer's fixed costs;
  //  * one GPU per rank at long K per rank (TP2 down-projections from PyTorch): fused won at
  //    K = 7168 and lost at 14336 (0.79x), where the reduction is ~6% of the GEMM (overlap_can_pay).
  if (topo.world == 1) return ReducePath::fused;
  const double flops = 2.0 * double(a.m) * double(a.n) * double(a.k);
  const bool pays = topo.max_ranks_per_gpu > 1 || overlap_can_pay(topo.world, a.k);
  return (a.m / topo.world >= 64 && flops >= 1e10 && pays) ? ReducePath::fused : ReducePath::decomposed;
}

// Ring/push in both regimes (docs/PERF.md, reduction workers of one warp):
//  * one GPU per rank (2 H200s): 1.17-1.27x over full-mesh push and 1.35-1.52x over full-mesh
//    pull at the default SMs — remote stores only, no remote loads, and each unit is summed as
//    soon as the one predecessor arrived (full mesh waits for every peer's slot);
//  * ranks sharing a GPU (8 in-process ranks): 1.06-1.51x over full-mesh pull, the best of the
//    rest (before the reduction worked in warps, full-mesh pull led by 1.5-2.6x).
RsSchedule gemm_rs_choose_algo(const Topology&) { return RsSchedule{RsAlgo::ring, CommMode::push}; }

// ---- gemm_ar -----------------------------------------------------------------------------------
// Rules measured on the H200 (docs/PERF.md, "gemm_ar"), N 8192, K 3584 per rank:
//  * 8 ranks sharing a GPU: fused two_shot won from M = 128 (16 rows per rank: 1.16x over the GEMM
//    followed by the one-shot reduction; 1.26x at 256, 1.60-1.65x from 512); one_shot was ~1.0x.
//    So: two_shot once every rank's block has >= 16 rows (blocks differ by at most one row when
//    W does not divide M); one_shot below.
//  * one GPU per rank (2 H200s over NVLink): GEMM + NCCL all-reduce won from M = 256 (fused
//    one/two-shot 0.76-0.99x of it); at M = 128 fused one_shot won (1.17x): every rank pulls its
//    peers' partials, one hop, where NCCL pays its launch and protocol latency. So: fused
//    one_shot while the bytes each rank pulls, M*N*2*(W-1), stay within 2 MiB. On 4 H200s that
//    is no decode M of N 8192 (M = 128 pulls 6 MiB; one_shot measured 0.79x there).
namespace {
constexpr double kOneShotPullBytes = 2.0 * 1024 * 1024;
bool one_gpu_per_rank_one_shot(const Topology& topo, const GemmArArgs& a) {
  const double bytes = double(a.m) * double(a.n) * double(dtype_size(a.dtype)) * (topo.world - 1);
  return bytes <= kOneShotPullBytes;
}
}  // namespace

ArAlgo gemm_ar_choose_algo(const Topology& topo, const GemmArArgs& a) {
  const int64_t w = topo.world;
  if (topo.max_ranks_per_gpu == 1 && w > 1) return ArAlgo::one_shot;  // fused or decomposed: see path
  return a.m >= 16 * w ? ArAlgo::two_shot : ArAlgo::one_shot;
}

ReducePath gemm_ar_choose_path(const Topology& topo, const GemmArArgs& a) {
  if (topo.world == 1) return ReducePath::fused;
  if (topo.max_ranks_per_gpu == 1)
    return one_gpu_per_rank_one_shot(topo, a) ? ReducePath::fused : ReducePath::decomposed;
  return a.m >= 16 * int64_t(topo.world) ? ReducePath::fused : ReducePath::decomposed;
}

namespace ops {

// ---- reduction SMs -------------------------------------------------------------------------------
int default_reduce_sms(const Topology& topo, int64_t k) {
  const int world = topo.world;
  if (topo.max_ranks_per_gpu == 1 && world > 1) {
    // One GPU per rank (NVLink): give the reduction the SMs that balance its traffic against the
    // GEMM. Measured on 2 H200s (docs/PERF.md, ring/push): K <= 2048 per rank wanted 32 SMs
    // (1.38-1.48x over cuBLAS+NCCL; 16 SMs: 1.07-1.14x), K >= 3584 wanted 16 (1.04-1.23x;
    // 32 SMs: 1.02-1.11x). Each rank moves (W-1)/W of its output per 2K flops per element, so K
    // is scaled to the 2-rank traffic before the threshold.
    const double k_at_two_ranks = double(k) * world / (2.0 * (world - 1));
    return std::min(topo.sm_count / 4, k_at_two_ranks <= 2048 ? 32 : 16);
  }
  // Ranks sharing a GPU: the paper's ~16-20 SMs of a whole GPU, a slice of the rank's share.
  return std::clamp(topo.sm_count / 7, 1, 20);
}

}  // namespace ops

}  // namespace tilelink
