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
// One rank has nothing to communicate: every op is its GEMM, and cuBLASLt (the decomposed paths)
// beat the engine on 7 of 7 reference and MLP shapes (1.02-1.39x, bench/gemm_vs_torch.py) and
// on 96 of 100 random ones (1.50x in geomean; docs/PERF.md, 2026-12-01).
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

// The decomposed paths with one GPU per rank split the GEMM by rank (one cuBLAS GEMM per rank's
// rows, the copy engine moving rows beside them: ops/gemm_rs/per_rank_gemms.hpp, ag_gemm.cu).
// Splitting hides the collective behind all but one of the GEMMs, and costs a handshake, W GEMM
// launches (and for reduce-scatter a final sum): fixed costs of ~10-15 us on the H200. So it pays
// once what the overlap could hide is worth well more than that: >= 4 MiB moved per rank (~16 us
// over NVLink), with a GEMM of >= 4 GFLOP per rank. The GEMM may be short: where the collective
// dominates, the copy engines moved the bytes faster than NCCL did (RS 14530 x 1104 x 272,
// 8.7 GFLOP: 1.20x).
// Measured on 2 H200s (docs/PERF.md, 2026-12-01), split against the collective then one GEMM:
//  * AG: won every reference shape with >= 4 MiB moved (1.00-1.48x of NCCL + cuBLAS, where the
//    unsplit path ran 0.94-1.05x); at 2 MiB (M = 512, N/8 = 1376/1792) it gained 3-10%; random shapes below the
//    bar lost (0.8 MiB: 0.68x; 2.4 MiB with a 1.4 GFLOP GEMM: 0.90x).
//  * RS: won every reference shape (1.24-1.41x) and 6 of 6 random shapes above the bar
//    (1.05-1.31x); below it, 836 x 3416 x 9600 (2.8 MiB) lost (0.93x).
namespace {
constexpr double kSplitMinBytesPerRank = 4.0 * 1024 * 1024;
constexpr double kSplitMinFlopsPerRank = 4e9;
bool split_pays(const Topology& topo, double bytes_per_rank, double flops_per_rank) {
  // Its copies read the peers' heaps: load/store peers only.
  return topo.world > 1 && topo.max_ranks_per_gpu == 1 && topo.peers_load_store &&
         bytes_per_rank >= kSplitMinBytesPerRank &&
         flops_per_rank >= kSplitMinFlopsPerRank;
}
}  // namespace

//  * one GPU per rank, 2 H200s, fused push/sm against the split decomposed path (docs/PERF.md,
//    2026-12-01): wherever the split pays, it beat fused on every shape measured (13 reference
//    and decode-sized shapes: split 1.00-1.48x of NCCL + cuBLAS, fused 0.94-1.24x; 3 random ones:
//    split 1.02-1.40x, fused 0.55-0.88x). With more ranks the split path pulls one peer at a time
//    while the fused gather reads every peer at once; not yet measured, so there the earlier
//    rule stands.
OpPath ag_gemm_choose_path(const Topology& topo, const AgGemmArgs& a) {
  if (topo.world == 1) return OpPath::decomposed;
  // Peers reached only through NVSHMEM put-with-signal (other nodes, or one node per process):
  // NCCL + cuBLAS where NCCL runs (one GPU per rank), since the fused gather over NVSHMEM has not
  // been measured across nodes; ranks sharing a GPU (NCCL refuses two ranks on one device) have
  // only the fused path.
  if (!topo.peers_load_store) return topo.max_ranks_per_gpu > 1 ? OpPath::fused : OpPath::decomposed;
  if (topo.max_ranks_per_gpu > 1) return OpPath::decomposed;
  if (topo.world == 2 && ops::ag_gemm_split_decomposed(topo, a)) return OpPath::decomposed;
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
  //  * one GPU per rank, 2 H200s, against the split decomposed path (docs/PERF.md, 2026-12-01):
  //    where the split pays, fused ring/push won only while the reduction's traffic takes about
  //    as long as the GEMM — K = 1376 per rank (1.46x against 1.38x), a tie at 1792 — where it
  //    overlaps the whole GEMM and the split only (W - 1) / W of it. With less traffic per flop
  //    (K >= 2304, 6 shapes) the split won (1.05-1.35x against fused 0.85-1.23x); with more
  //    (K = 272-752) its copy engines outran the reduction kernel (1.20-1.29x against 0.98-1.17x).
  //    So: split, except for (W - 1) / (W K) bytes per flop in [1/4096, 1/2048]. More ranks:
  //    not yet measured, the earlier rule stands.
  if (topo.world == 1) return ReducePath::decomposed;
  // Peers reached only through NVSHMEM put-with-signal: as ag_gemm — cuBLAS + NCCL with a GPU per
  // rank (the fused push over NVSHMEM is unmeasured across nodes), fused on a shared GPU.
  if (!topo.peers_load_store) return topo.max_ranks_per_gpu > 1 ? ReducePath::fused : ReducePath::decomposed;
  const double flops = 2.0 * double(a.m) * double(a.n) * double(a.k);
  const bool pays = topo.max_ranks_per_gpu > 1 || overlap_can_pay(topo.world, a.k);
  const bool fused = a.m / topo.world >= 64 && flops >= 1e10 && pays;
  if (topo.world == 2 && ops::gemm_rs_split_decomposed(topo, a)) {
    const double bytes_per_flop = double(topo.world - 1) / (double(topo.world) * double(a.k));
    const bool balanced = bytes_per_flop >= 1.0 / 4096 && bytes_per_flop <= 1.0 / 2048;
    return fused && balanced ? ReducePath::fused : ReducePath::decomposed;
  }
  return fused ? ReducePath::fused : ReducePath::decomposed;
}

// Ring/push in both regimes (docs/PERF.md, reduction workers of one warp):
//  * one GPU per rank (2 H200s): 1.17-1.27x over full-mesh push and 1.35-1.52x over full-mesh
//    pull at the default SMs — remote stores only, no remote loads, and each unit is summed as
//    soon as the one predecessor arrived (full mesh waits for every peer's slot);
//  * ranks sharing a GPU (8 in-process ranks): 1.06-1.51x over full-mesh pull, the best of the
//    rest (before the reduction worked in warps, full-mesh pull led by 1.5-2.6x).
// Peers reached only through NVSHMEM put-with-signal: full-mesh push, the one schedule that runs
// over it (docs/OPS.md).
RsSchedule gemm_rs_choose_algo(const Topology& topo) {
  if (!topo.peers_load_store) return RsSchedule{RsAlgo::full_mesh, CommMode::push};
  return RsSchedule{RsAlgo::ring, CommMode::push};
}

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

// Peers reached only through NVSHMEM put-with-signal: two_shot, the all-reduce that runs over it
// (every byte pushed), on the path ag_gemm and gemm_rs take there.
ArAlgo gemm_ar_choose_algo(const Topology& topo, const GemmArArgs& a) {
  const int64_t w = topo.world;
  if (!topo.peers_load_store && w > 1) return ArAlgo::two_shot;
  if (topo.max_ranks_per_gpu == 1 && w > 1) return ArAlgo::one_shot;  // fused or decomposed: see path
  return a.m >= 16 * w ? ArAlgo::two_shot : ArAlgo::one_shot;
}

ReducePath gemm_ar_choose_path(const Topology& topo, const GemmArArgs& a) {
  if (topo.world == 1) return ReducePath::decomposed;
  if (!topo.peers_load_store) return topo.max_ranks_per_gpu > 1 ? ReducePath::fused : ReducePath::decomposed;
  if (topo.max_ranks_per_gpu == 1)
    return one_gpu_per_rank_one_shot(topo, a) ? ReducePath::fused : ReducePath::decomposed;
  return a.m >= 16 * int64_t(topo.world) ? ReducePath::fused : ReducePath::decomposed;
}

namespace ops {

// ---- the decomposed paths split by rank (split_pays above) ------------------------------------
bool ag_gemm_split_decomposed(const Topology& topo, const AgGemmArgs& a) {
  const double received = double(topo.world - 1) * double(a.m_per_rank) * double(a.k) * double(dtype_size(a.dtype));
  const double flops = 2.0 * double(a.m_per_rank) * double(topo.world) * double(a.n) * double(a.k);
  return split_pays(topo, received, flops);
}

bool gemm_rs_split_decomposed(const Topology& topo, const GemmRsArgs& a) {
  const double rows = double(a.m / topo.world);
  const double sent = double(topo.world - 1) * rows * double(a.n) * double(dtype_size(a.dtype));
  return split_pays(topo, sent, 2.0 * double(a.m) * double(a.n) * double(a.k));
}

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

// ---- MoE gather ----------------------------------------------------------------------------------
bool moe_pull_tokens_first(int32_t topk) {
  // Sorting straight from a peer reads each of its tokens over the link once per expert that chose
  // it: topk times. Pulling first moves every token once and adds a local write and read of it,
  // which HBM (~4.8 TB/s) does an order of magnitude faster than NVLink (~0.45 TB/s per direction)
  // moves it. Measured on 2 H200s before the pull existed: ag_moe 0.59x of PyTorch on DeepSeek-V3
  // and 0.98x on Qwen3-30B-A3B (top-8), 1.11-1.26x on the top-2..6 models.
  return topk > 1;
}

}  // namespace ops

}  // namespace tilelink
