// The GEMM heuristic's shared vocabulary (private to the engine): a config's grid on the shape,
// the machine's bandwidths, and which slice counts a split with a separate sum may run.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm::heuristic {

constexpr double kHbmBytesPerUs = 4.0e6;  // 4 TB/s
constexpr double kL2Bytes = 40.0 * 1024 * 1024;

// The kernel's own (M, N): swapped configs run over (N, M).
struct KernelDims {
  int64_t m, n;
};
inline KernelDims kernel_dims(const GemmShape& s, const GemmConfigInfo& c) {
  return c.operands == GemmOperands::ba ? KernelDims{s.N, s.M} : KernelDims{s.M, s.N};
}

// The clusters of `size` CTAs (one CTA per SM) that run at once within `sms` SMs. A cluster's
// CTAs share one GPC, and a 132-SM Hopper's GPCs hold only 30 clusters of four (120 SMs) and 15
// of eight: cuBLASLt's one-wave grids of such clusters there are 120 CTAs, and the engine's 2x2
// kernels ran at 0.69x their 2-CTA twins' speed on 31-33 cluster tiles (two waves) against 1.06x
// on 30 (docs/PERF.md, "2x2 clusters on the wide tiles"). Clusters of one or two fit every SM.
constexpr int64_t kSmsForClustersOfFour = 120;
inline int64_t cluster_slots(int sms, int size) {
  const int64_t by_sms = sms / size;
  return std::max<int64_t>(1, size < 4 ? by_sms : std::min<int64_t>(by_sms, kSmsForClustersOfFour / size));
}

struct GridCount {
  int64_t units, slots, unit_rows, unit_cols;
};
inline GridCount grid_count(const GemmShape& s, const GemmConfigInfo& c, int sms) {
  const KernelDims d = kernel_dims(s, c);
  const int64_t rows = int64_t(c.tile_m) * c.cluster_m, cols = int64_t(c.tile_n) * c.cluster_n;
  const int64_t units = ((d.m + rows - 1) / rows) * ((d.n + cols - 1) / cols);
  return {units, cluster_slots(sms, c.cluster_m * c.cluster_n), rows, cols};
}

// A swapped tile holds tile_n of A's rows, so ceil(M / tile_n) tile columns each read all of B.
inline int64_t swapped_columns(const GemmShape& s, const GemmConfigInfo& c) { return (s.M + c.tile_n - 1) / c.tile_n; }
// How many times a swapped config reads all of B: once per cluster column, each weight tile
// multicast to the cluster's tile columns.
inline int64_t swapped_b_reads(const GemmShape& s, const GemmConfigInfo& c) {
  const int64_t rows = int64_t(c.tile_n) * c.cluster_n;
  return (s.M + rows - 1) / rows;
}

// split_k_reduce: the slices run as one batched launch writing fp32 partial sums, one more pass
// adds them. No chain, so a short grid can split K many ways — but the extra pass (a launch, the
// partial sums written and read: the cost each score charges for it) must pay, so
// K >= kMinReduceDepth, slices of at least kMinReduceSliceK and at least kMinReduceSplits of them;
// the count is the best-scoring one, not simply the largest. Measured on grids of 2-13 tiles with
// K of 2072-4240 (docs/PERF.md): 3-13 slices ran 1.4-2.3x faster than whole tiles; 2 slices lost
// every time (0.45-0.64x cuBLASLt against 0.49-0.80x whole), the pass costing more than half a
// short K loop saves. (Swapped tiles over few rows are scored by swapped_time_score instead.)
// Slices are whole 8-element steps; the pass multiplies the columns left over (k_slices: fewer
// than 8 x splits) on CUDA cores, so that tail is kept to a few hundred thousand products per
// pass — small next to the 3-10 us such GEMMs take.
constexpr int64_t kMinReduceDepth = 2048;
constexpr int64_t kMinReduceSliceK = 256;
constexpr int64_t kMinReduceSplits = 3;
constexpr double kMaxPartialBytes = 256.0 * 1024 * 1024;
constexpr double kMaxTailProducts = 4.0 * 1024 * 1024;

// Among the slice counts split_k_reduce may run for the shape, the one `score(splits)` rates best,
// with its score; {1, 0} when none may run.
struct ReduceSplits {
  int splits = 1;
  double score = 0.0;
};
template <class Score>
ReduceSplits best_reduce_splits(const GemmShape& s, const GemmConfigInfo& c, int sms, Score score) {
  ReduceSplits best;
  if (s.K < kMinReduceDepth) return best;
  const GridCount g = grid_count(s, c, sms);
  const int64_t cap = std::min({g.slots / std::max<int64_t>(1, g.units), s.K / kMinReduceSliceK, int64_t(kMaxSplits)});
  for (int64_t splits = kMinReduceSplits; splits <= cap; ++splits) {
    if (double(k_slices(s.K, int(splits)).tail) * double(s.M) * double(s.N) > kMaxTailProducts) continue;
    if (double(splits) * double(s.M) * double(s.N) * 4.0 > kMaxPartialBytes) continue;
    const double v = score(int(splits));
    if (v > best.score + 1e-9) best = {int(splits), v};
  }
  return best;
}

}  // namespace tilelink::gemm::heuristic
