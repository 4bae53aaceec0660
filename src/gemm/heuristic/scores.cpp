// The GEMM heuristic's score: each config's best work division, rated by how much of the grid it
// fills times the kernel's fitted speed (swapped tiles over few rows: by a predicted time).
//
// Rule (docs/GEMM.md "Heuristic"): every allowed config, with each work division it can run,
// gets
//     score = grid_efficiency(shape, config, division, SMs) * throughput_prior(config, K)
// and the best score wins; ties go to the earlier (simpler) candidate. grid_efficiency is the
// fraction of the persistent grid's tile slots that do useful work (partial edge tiles count
// for their covered area), less what a split pays to reduce its partial sums; the priors are
// each kernel's relative per-tile speed, fitted to the device sweeps (tilelink-bench gemm
// --sweep, --sweep-random).
#include "scores.hpp"

#include <algorithm>
#include <cmath>

#include "grid.hpp"

namespace tilelink::gemm::heuristic {
namespace {

// Data-parallel: whole tiles, whole waves.
double wave_efficiency(const GemmShape& s, const GemmConfigInfo& c, int sms) {
  const GridCount g = grid_count(s, c, sms);
  const int64_t waves = (g.units + g.slots - 1) / g.slots;
  const double capacity = double(waves) * double(g.slots) * double(g.unit_rows) * double(g.unit_cols);
  return double(s.M) * double(s.N) / capacity;
}

// Split-K pays per launch (zeroing the lock workspace) and per slice (the tile's fp32 partial
// sums pass through memory, one slice after the other), which only long slices amortise: on the
// H200 it won where each tile's K was >= 16k and lost or tied at K <= 4k, even on grids of 7
// tiles (docs/PERF.md, "split-K, stream-K and swapped operands"). So: K >= kMinSplitDepth, and
// slices of at least kMinSliceK.
constexpr int64_t kMinSplitDepth = 8192;
constexpr int64_t kMinSliceK = 2048;
// The fixup of one slice, in K iterations of work it costs on top of its own.
constexpr double kSliceFixupK = 512.0;

// The deterministic fixup is a chain: slice i adds its partial sums after slice i-1, one global
// memory round trip (~2-3 us on the H200) each. Measured: 2-4 slices 0.80-0.91x cuBLASLt, 6-15
// slices 0.33-0.61x on the same kind of grid. So at most kMaxChainedSplits.
constexpr int64_t kMaxChainedSplits = 4;

// The split count that fills one wave: as many K slices per tile as idle slots allow.
int split_count(const GemmShape& s, const GemmConfigInfo& c, int sms) {
  if (s.K < kMinSplitDepth) return 1;
  const GridCount g = grid_count(s, c, sms);
  const int64_t by_grid = g.slots / std::max<int64_t>(1, g.units);
  const int64_t by_depth = s.K / kMinSliceK;
  return int(std::max<int64_t>(1, std::min({by_grid, by_depth, kMaxChainedSplits})));
}

// Useful work over the grid's capacity when every tile's K runs as `splits` work items of
// `slice_k` K-iterations each (whole waves of them).
double sliced_efficiency(const GemmShape& s, const GemmConfigInfo& c, int sms, int splits, double slice_k) {
  const GridCount g = grid_count(s, c, sms);
  const int64_t waves = (g.units * splits + g.slots - 1) / g.slots;
  const double capacity = double(waves) * double(g.slots) * double(g.unit_rows) * double(g.unit_cols) * slice_k;
  return double(s.M) * double(s.N) * double(s.K) / capacity;
}

// Chained split-K: slices of whole k tiles, each paying its fixup.
double split_efficiency(const GemmShape& s, const GemmConfigInfo& c, int sms, int splits) {
  const int64_t k_tiles = (s.K + c.tile_k - 1) / c.tile_k;
  const double slice_k = double((k_tiles + splits - 1) / splits * c.tile_k) + kSliceFixupK;
  return sliced_efficiency(s, c, sms, splits, slice_k);
}

// split_k_reduce (its slice counts: grid.hpp): the summing pass's launch, beside the partial sums'
// bytes against the operands'.
constexpr double kReducePassCost = 0.92;

double reduce_efficiency(const GemmShape& s, const GemmConfigInfo& c, int sms, int splits) {
  // The partial sums cross memory twice (written, read back) against the operands' bytes.
  const double partial = 2.0 * double(splits) * double(s.M) * double(s.N) * 4.0;
  const double operands = (double(s.M) + double(s.N)) * double(s.K) * 2.0;
  return sliced_efficiency(s, c, sms, splits, double(s.K / splits)) / (1.0 + partial / operands) * kReducePassCost;
}

int reduce_split_count(const GemmShape& s, const GemmConfigInfo& c, int sms) {
  return best_reduce_splits(s, c, sms, [&](int splits) { return reduce_efficiency(s, c, sms, splits); }).splits;
}

// Stream-K: every SM gets an equal share of the K iterations, so only the edge tiles' padding
// is lost; the CTAs that share a tile meet in the workspace (kStreamKCost). It needs a deep K to
// share (kMinStreamK) and more than half a wave of tiles (fewer: split_k is the simpler form).
constexpr double kStreamKCost = 0.93;
constexpr int64_t kMinStreamK = 4096;
double stream_k_efficiency(const GemmShape& s, const GemmConfigInfo& c, int sms) {
  const GridCount g = grid_count(s, c, sms);
  if (s.K < kMinStreamK) return 0.0;
  if (g.units <= g.slots / 2) return 0.0;
  const double padded = double(g.units) * double(g.unit_rows) * double(g.unit_cols);
  return double(s.M) * double(s.N) / padded * kStreamKCost;
}

// The wide swapped tiles (96-192 of A's rows, 128-256 weight rows) are for tens to a few hundred
// rows, where an unswapped tile pads M to its 64- or 128-row granularity and only the tile count
// along N sets the waves. They are scored by the swapped time model below, each with its own MMA
// rate per SM: the value that fits its whole-tile times best (mean log error 5-19%) on
// `tilelink-bench gemm --divisions` over 71 shapes of M = 16-3657 (docs/PERF.md, "wide swapped
// tiles"), except cpba_128x192, whose best fit (6.8) overpredicted it by 35-60% on N >= 10000, so
// the lower 5.0. 144-wide ping-pong and cooperative tiles were built too and ran at 2.8 (a
// 16-column epilogue step, as the unswapped 144-wide tiles before them): dropped.
//
// The score takes a wide tile over at most kMaxWideSwappedColumns columns of M: beyond, other
// tiles won every measured shape but one by 1.5% (809 x 16488 x 1472 on nine 192x96 columns).
// At 64-4095 rows the time model compares them over any number of columns instead (whole, the
// division given here): narrow N with M in the thousands is where they win. kWidePrior weighs
// their time score against the unswapped tiles' grid fill: the model's ideal kernel runs 5 TFLOP/s
// per SM where the best unswapped tiles run ~6.3 (prior 1.04), and the rule's picks over the
// measured shapes were best at 0.70-0.80.
constexpr double kWidePrior = 0.75;
constexpr int64_t kMaxWideSwappedColumns = 4;
struct SwappedRate {
  GemmConfig config;
  double sm_flops_per_us;
};
constexpr SwappedRate kWideSwappedRates[] = {
    {GemmConfig::ppba_128x96_c1x1, 4.3e6},  {GemmConfig::ppba_192x96_c1x1, 5.4e6},
    {GemmConfig::cpba_128x192_c1x1, 5.0e6}, {GemmConfig::cpba_256x160_c1x1, 4.6e6},
    // The clustered twins: their division is chosen as the unclustered tile's would be.
    {GemmConfig::ppba_128x96_c1x2, 4.3e6},  {GemmConfig::cpba_128x192_c2x1, 5.0e6},
    {GemmConfig::ppba_128x96_c2x2, 4.3e6},
};

// 0 for the narrow swapped tiles and every unswapped one.
double wide_swapped_rate(GemmConfig cfg) {
  for (const SwappedRate& r : kWideSwappedRates)
    if (r.config == cfg) return r.sm_flops_per_us;
  return 0.0;
}

// Relative per-tile speed of each kernel against cuBLAS on full waves, for K > 2048 and
// K <= 2048: the median over the reference shapes of (best ratio to cuBLAS) / wave_efficiency,
// from `tilelink-bench gemm --sweep` on the H200 (2026-11-29, docs/PERF.md). The 128x176,
// 256x112, 128x144 and 128x224 tiles measured 0.4-0.7x cuBLAS there and were dropped.
// pp_64x128_c2x1 is fitted to the decode-sized-M sweep instead (M = 128, N 8192, K 3584).
struct Prior {
  GemmConfig config;
  double long_k, short_k;
  int64_t max_m = 0;          // > 0: the values above were measured up to this M only...
  double beyond_max_m = 0.0;  // ...and this one applies above it
};
constexpr Prior kPriors[] = {
    {GemmConfig::coop_128x256_c2x1, 1.041, 1.004}, {GemmConfig::coop_128x256_c1x1, 1.041, 0.992},
    {GemmConfig::pp_128x192_c2x1, 1.069, 1.068},   {GemmConfig::pp_128x128_c2x1, 1.039, 1.043},
    {GemmConfig::pp_128x128_c1x2, 1.02, 1.02},  // at its best raster (along_m) a bit below c2x1
    // Decode-sized M: 0.96x cuBLAS at M = 128 (wave efficiency 0.97), `gemm --sweep --shapes decode`,
    // 2026-11-29 evening. Its 2x1 cluster multicasts each B tile to both 64-row tiles: decode GEMMs are
    // bound by reading B, and the 1x2 cluster (B read twice through L2) reached only 0.80x.
    // Above decode sizes (unmeasured there) it stays below every 128-row tile.
    {GemmConfig::pp_64x128_c2x1, 0.99, 0.99, 512, 0.83},
    {GemmConfig::coop_256x128_c1x2, 1.041, 1.001}, {GemmConfig::coop_128x192_c2x1, 1.038, 0.992},
    {GemmConfig::coop_128x256_c1x2, 1.037, 0.999}, {GemmConfig::coop_256x128_c2x1, 1.041, 0.993},
    {GemmConfig::coop_128x128_c2x1, 1.024, 0.952}, {GemmConfig::pp_64x128_c1x2, 0.83, 0.83},
    // The cooperative kernel on the stream-K scheduler, from the random-shape sweeps (docs/PERF.md,
    // "split-K, stream-K and swapped operands"). 128x256 c2x1: like its data-parallel twin.
    // 128x128 without a cluster: 0.53-0.66x cuBLASLt data-parallel where the ping-pong 128x128
    // ran 0.65-0.80x. Swapped 128x64: for M <= 64 one tile column holds every row and the GEMM is
    // bound by reading B; it ran 0.70-0.95x where the 64x128 ping-pong it ties with on grid fill
    // ran 0.47-0.76x (each of its clusters idles one consumer warp group). How many rows a
    // swapped tile may take: swapped_columns_factor below.
    {GemmConfig::sk_128x256_c2x1, 1.02, 0.98}, {GemmConfig::sk_128x128_c1x1, 0.80, 0.76},
    {GemmConfig::skba_128x64_c1x1, 0.92, 0.92},
    // Swapped 64-row tiles as narrow as M (docs/PERF.md, "narrow swapped tiles"): on 43 shapes of
    // M <= 777 the 64x16 tile ran 0.96-1.06x cuBLASLt whole where its grid was full (M <= 16, N of
    // 8k-29k), 0.78-1.01x split. A little below the 128-row swapped tile where both hold all rows
    // at M = 33-64 and deep K (40 x 784 x 16248, 64 rows wide: 0.83x against 0.90x).
    {GemmConfig::ppba_64x16_c1x1, 1.00, 1.00}, {GemmConfig::ppba_64x32_c1x1, 1.00, 1.00},
    // The wide swapped tiles: their predicted-time score against the unswapped tiles' grid fill
    // (see kWideSwappedRates).
    {GemmConfig::ppba_128x96_c1x1, kWidePrior, kWidePrior},  {GemmConfig::ppba_192x96_c1x1, kWidePrior, kWidePrior},
    {GemmConfig::cpba_128x192_c1x1, kWidePrior, kWidePrior}, {GemmConfig::cpba_256x160_c1x1, kWidePrior, kWidePrior},
    {GemmConfig::ppba_128x96_c1x2, kWidePrior, kWidePrior},  {GemmConfig::cpba_128x192_c2x1, kWidePrior, kWidePrior},
};

// A swapped tile over ceil(M / tile_n) tile columns reads all of B once per column. One column is
// the case it is for. A few columns won where K is short (56 x 608 x 936 on four 64x16 columns:
// 0.96x cuBLASLt, the best unswapped tile 0.71x; 309 x 2360 x 560 on five 128x64 columns: 1.14x)
// and lost where it is not (116 x 4088 x 6328 on two 64x64 columns: 0.78x against 0.99x; 40 x 784 x
// 16248 on three 64x16 columns 0.59x against one 128x64 column 0.90x; the 128x64 tile at M of
// 2000-2400 and deep K: 0.31-0.49x), and each extra column cost a little even where B stays in L2
// (24 x 4264 x 696: one 64x32 column 0.96x, two 64x16 columns 0.86x).
constexpr int64_t kMaxSwappedColumns = 5;
constexpr int64_t kMaxSwappedColumnsK = 4096;
constexpr double kSwappedBeyond = 0.30;
constexpr double kExtraColumnCost = 0.03;

double swapped_columns_factor(const GemmShape& s, const GemmConfigInfo& c) {
  const int64_t columns = swapped_columns(s, c);
  if (columns == 1) return 1.0;
  if (columns > kMaxSwappedColumns || s.K > kMaxSwappedColumnsK) return kSwappedBeyond;
  return 1.0 - kExtraColumnCost * double(columns - 1);
}

// Deep K (> kDeepK): 128x128 and smaller tiles ran 0.61-0.81x cuBLASLt data-parallel on the
// random shapes (e.g. 8712x1544x17120, 128x128 ping-pong: 0.69x) where the 128x256 tiles with
// stream-K ran 0.82-0.99x; the priors above were fitted on the reference shapes, where no
// 128x128 tile ran with K > 8192.
constexpr int64_t kDeepK = 8192;
constexpr double kDeepKSmallTile = 0.85;

double fitted_prior(GemmConfig cfg, const GemmShape& s) {
  const bool short_k = s.K <= 2048;
  for (const Prior& p : kPriors) {
    if (p.config != cfg) continue;
    if (p.max_m > 0 && s.M > p.max_m) return p.beyond_max_m;
    return short_k ? p.short_k : p.long_k;
  }
  return 0.0;
}

double throughput_prior(GemmConfig cfg, const GemmShape& s) {
  const GemmConfigInfo& info = config_info(cfg);
  double factor = s.K > kDeepK && info.operands == GemmOperands::ab && info.tile_m * info.tile_n <= 128 * 128
                    ? kDeepKSmallTile
                    : 1.0;
  // The wide swapped tiles' time model counts their columns itself.
  if (info.operands == GemmOperands::ba && wide_swapped_rate(cfg) == 0.0) factor *= swapped_columns_factor(s, info);
  if (const double p = fitted_prior(cfg, s); p > 0.0) return p * factor;
  // Configs without a fitted prior (sweep set, when allowed): by tile area.
  if (info.schedule == GemmSchedule::pp) return 0.90 * factor;
  const int area = info.tile_m * info.tile_n;
  const double p = area >= 128 * 256 ? 1.0 : area >= 128 * 192 ? 0.97 : area >= 128 * 176 ? 0.96 : 0.93;
  return (s.K <= 2048 ? p * 0.96 : p) * factor;
}

// Swapped tiles over few rows are bound by streaming B, not by the MMA, and the share of the
// grid they fill says little about their speed there: a CTA streams its tile's rows of B at
// ~100 GB/s and ~40 of them saturate the 4 TB/s of HBM, so 25 tiles of 64 weight rows ran 8.2 us
// whole against 9.8 us split (6 x 1560 x 3568), while 8 of them ran 22.9 us whole against 8.8 us
// in 11 slices (5 x 488 x 13424). For them the rule scores a predicted time instead:
//   t = floor + max(all bytes / HBM, waves x max(a tile's bytes / SM rate, its MMA work / SM
//   rate)), plus the summing pass and the partial sums' traffic when K is split,
// against the time of the ideal kernel (floor + max(bytes / HBM, MMA work / whole GPU)).
// Calibrated on 50 one-column (config, shape) pairs of M <= 56 (docs/PERF.md, "narrow swapped
// tiles"): predicted and measured times within ~20%, the better of whole and split right in all
// but near-ties.
constexpr double kFloorUs = 3.0;           // a launch, the pipeline filling, the epilogue's stores
constexpr double kReducePassUs = 4.0;      // the summing pass: a second launch and its round trip
constexpr double kSmBytesPerUs = 1.0e5;    // 100 GB/s per CTA streaming its tiles
constexpr double kSmFlopsPerUs = 5.0e6;    // 5 TFLOP/s per SM on bf16 MMA

// Ideal time over predicted time of a swapped config run whole (splits = 1) or in `splits`
// slices with a separate sum.
double swapped_time_score(const GemmShape& s, GemmConfig cfg, int sms, int splits) {
  const GemmConfigInfo& c = config_info(cfg);
  const double wide_rate = wide_swapped_rate(cfg);
  const double sm_rate = wide_rate > 0.0 ? wide_rate : kSmFlopsPerUs;
  const GridCount g = grid_count(s, c, sms);
  const int64_t b_reads = swapped_b_reads(s, c);
  const double b_bytes = double(s.N) * double(s.K) * 2.0, a_bytes = double(s.M) * double(s.K) * 2.0;
  const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
  const double ideal = kFloorUs + std::max((a_bytes + b_bytes) / kHbmBytesPerUs, flops / (sms * kSmFlopsPerUs));
  const double slice_k = double(s.K) / splits;
  const double unit_bytes = double(c.tile_m + c.tile_n) * slice_k * 2.0;
  const double unit_flops = 2.0 * double(c.tile_m) * double(c.tile_n) * slice_k;
  const double unit_us = std::max(unit_bytes / kSmBytesPerUs, unit_flops / sm_rate);
  const int64_t waves = (g.units * splits + g.slots - 1) / g.slots;
  // Every cluster column reads all of B; from L2 while B fits there, else from memory again.
  const double read_bytes = a_bytes + b_bytes * (b_bytes > kL2Bytes ? double(b_reads) : 1.0);
  double t = kFloorUs + std::max(read_bytes / kHbmBytesPerUs, double(waves) * unit_us);
  if (splits > 1) t += kReducePassUs + 2.0 * double(splits) * double(s.M) * double(s.N) * 4.0 / kHbmBytesPerUs;
  return ideal / t;
}

}  // namespace

bool has_fitted_prior(GemmConfig cfg) {
  for (const Prior& p : kPriors)
    if (p.config == cfg) return true;
  return false;
}

Candidate best_division(const GemmShape& s, GemmConfig cfg, int sms) {
  const GemmConfigInfo& c = config_info(cfg);
  const double prior = throughput_prior(cfg, s);
  // Swapped tiles are scored by predicted time: the narrow ones over at most kMaxSwappedColumns
  // columns (beyond, they are compute-bound and grid fill applies), the wide ones over at most
  // kMaxWideSwappedColumns (beyond, not at all).
  const bool wide = wide_swapped_rate(cfg) > 0.0;
  if (wide && swapped_columns(s, c) > kMaxWideSwappedColumns) return {GemmPlan{cfg}, 0.0};
  if (c.operands == GemmOperands::ba && (wide || swapped_columns(s, c) <= kMaxSwappedColumns)) {
    Candidate best{GemmPlan{cfg}, swapped_time_score(s, cfg, sms, 1) * prior};
    const ReduceSplits split =
        best_reduce_splits(s, c, sms, [&](int splits) { return swapped_time_score(s, cfg, sms, splits) * prior; });
    if (split.splits >= 2 && split.score > best.score + 1e-9)
      best = {GemmPlan{cfg, Raster::along_n, 1, Decomposition::split_k_reduce, split.splits}, split.score};
    return best;
  }
  Candidate best{GemmPlan{cfg}, wave_efficiency(s, c, sms) * prior};
  if (c.set != GemmConfigSet::plain) return best;
  const int reduce_splits = reduce_split_count(s, c, sms);
  if (reduce_splits >= 2) {
    const double score = reduce_efficiency(s, c, sms, reduce_splits) * prior;
    if (score > best.score + 1e-9)
      best = {GemmPlan{cfg, Raster::along_n, 1, Decomposition::split_k_reduce, reduce_splits}, score};
  }
  if (c.schedule != GemmSchedule::sk) return best;
  const int splits = split_count(s, c, sms);
  if (splits >= 2) {
    const double score = split_efficiency(s, c, sms, splits) * prior;
    if (score > best.score + 1e-9) best = {GemmPlan{cfg, Raster::along_n, 1, Decomposition::split_k, splits}, score};
  }
  const double sk = stream_k_efficiency(s, c, sms) * prior;
  if (sk > best.score + 1e-9) best = {GemmPlan{cfg, Raster::along_n, 1, Decomposition::stream_k, 1}, sk};
  return best;
}

}  // namespace tilelink::gemm::heuristic
