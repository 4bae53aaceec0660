// Host side of the GEMM engine: validation, the config heuristic, the run-time-dtype entry point.
#include "tilelink/gemm/gemm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "plain_plan.hpp"
#include "tilelink/gemm/hooks.cuh"
#include "tilelink/core/error.hpp"

namespace tilelink::gemm {

bool parse_config(const std::string& name, GemmConfig* out) {
  for (int i = 0; i < kNumGemmConfigs; ++i) {
    if (name == kGemmConfigInfo[i].name) {
      *out = static_cast<GemmConfig>(i);
      return true;
    }
  }
  return false;
}

const char* decomposition_name(Decomposition d) {
  switch (d) {
    case Decomposition::split_k: return "split_k";
    case Decomposition::stream_k: return "stream_k";
    case Decomposition::split_k_reduce: return "split_k_reduce";
    default: return "data_parallel";
  }
}

const char* raster_name(Raster r) {
  switch (r) {
    case Raster::along_m: return "along_m";
    case Raster::along_n: return "along_n";
    default: return "heuristic";
  }
}

void fail_config_not_in_set(GemmConfig c, const char* what) {
  const int i = static_cast<int>(c);
  if (i < 0 || i >= kNumGemmConfigs) ::tilelink::detail::fail("gemm: invalid config id ", i, " in ", what);
  ::tilelink::detail::fail("gemm: config ", kGemmConfigInfo[i].name, " is not in the library set; ", what);
}

void validate(const GemmShape& shape, const void* A, const void* B, const void* D, const char* who) {
  const GemmShape s = packed(shape);
  auto req = [&](bool ok, auto&&... parts) {
    if (!ok) ::tilelink::detail::fail("gemm[", who, "] M=", s.M, " N=", s.N, " K=", s.K, ": ", parts...);
  };
  req(s.M >= 0 && s.N >= 0 && s.K >= 0, "negative dimension");
  const int64_t kMax = int64_t(1) << 31;
  req(s.M < kMax && s.N < kMax && s.K < kMax, "dimensions must be < 2^31");
  if (s.M == 0 || s.N == 0) return;
  req(s.K > 0, "K must be positive (K = 0 would leave D unwritten)");
  req(s.N % 8 == 0, "N must be a multiple of 8 (16-byte TMA rows of D)");
  req(s.K % 8 == 0, "K must be a multiple of 8 (16-byte TMA rows of A and B)");
  req(s.lda >= s.K && s.lda % 8 == 0, "lda=", s.lda, " must be >= K and a multiple of 8");
  req(s.ldb >= s.K && s.ldb % 8 == 0, "ldb=", s.ldb, " must be >= K and a multiple of 8");
  req(s.ldd >= s.N && s.ldd % 8 == 0, "ldd=", s.ldd, " must be >= N and a multiple of 8");
  req(A != nullptr && B != nullptr && D != nullptr, "null operand pointer");
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  req(aligned(A), "A is not 16-byte aligned");
  req(aligned(B), "B is not 16-byte aligned");
  req(aligned(D), "D is not 16-byte aligned");
}

namespace detail {

int current_device_or_throw(const char* who) {
  int device = -1;
  const cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) ::tilelink::detail::fail("gemm[", who, "]: cudaGetDevice failed: ", cudaGetErrorString(e));
  return device;
}

int device_sm_count(int device) {
  static std::atomic<int> cache[64] = {};
  if (device >= 0 && device < 64) {
    const int c = cache[device].load(std::memory_order_relaxed);
    if (c > 0) return c;
  }
  int sms = 0;
  const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess || sms <= 0) ::tilelink::detail::fail("gemm: cannot query SM count of device ", device);
  if (device >= 0 && device < 64) cache[device].store(sms, std::memory_order_relaxed);
  return sms;
}

namespace {
struct KernelSetups {
  std::mutex mutex;
  std::vector<KernelSetup> setups;
  std::set<int> prepared;  // devices
};
KernelSetups& kernel_setups() {
  static KernelSetups k;
  return k;
}
}  // namespace

bool register_kernel_setup(KernelSetup setup) {
  auto& k = kernel_setups();
  std::lock_guard<std::mutex> lock(k.mutex);
  k.setups.push_back(setup);
  return true;
}

}  // namespace detail

void prepare_kernels() {
  const int device = detail::current_device_or_throw("prepare_kernels");
  auto& k = detail::kernel_setups();
  std::lock_guard<std::mutex> lock(k.mutex);
  if (!k.prepared.insert(device).second) return;
  for (detail::KernelSetup setup : k.setups) setup(device);
}

// ---- heuristic -----------------------------------------------------------------------------
// Rule (docs/GEMM.md "Heuristic"): every allowed config, with each work division it can run,
// gets
//     score = grid_efficiency(shape, config, division, SMs) * throughput_prior(config, K)
// and the best score wins; ties go to the earlier (simpler) candidate. grid_efficiency is the
// fraction of the persistent grid's tile slots that do useful work (partial edge tiles count
// for their covered area), less what a split pays to reduce its partial sums; the priors are
// each kernel's relative per-tile speed, fitted to the device sweeps (tilelink-bench gemm
// --sweep, --sweep-random). Raster/swizzle: along_n, swizzle by B's size.
namespace {

// The kernel's own (M, N): swapped configs run over (N, M).
struct KernelDims {
  int64_t m, n;
};
KernelDims kernel_dims(const GemmShape& s, const GemmConfigInfo& c) {
  return c.operands == GemmOperands::ba ? KernelDims{s.N, s.M} : KernelDims{s.M, s.N};
}

struct GridCount {
  int64_t units, slots, unit_rows, unit_cols;
};
GridCount grid_count(const GemmShape& s, const GemmConfigInfo& c, int sms) {
  const KernelDims d = kernel_dims(s, c);
  const int64_t rows = int64_t(c.tile_m) * c.cluster_m, cols = int64_t(c.tile_n) * c.cluster_n;
  const int64_t units = ((d.m + rows - 1) / rows) * ((d.n + cols - 1) / cols);
  return {units, std::max<int64_t>(1, sms / (c.cluster_m * c.cluster_n)), rows, cols};
}

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

// split_k_reduce: the slices run as one batched launch writing fp32 partial sums, one more pass
// adds them. No chain, so a short grid can split K many ways — but the extra pass (a launch, the
// partial sums written and read: kReducePassCost and the bytes term below) must pay, so
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
constexpr double kReducePassCost = 0.92;
constexpr double kMaxPartialBytes = 256.0 * 1024 * 1024;
constexpr double kMaxTailProducts = 4.0 * 1024 * 1024;

double reduce_efficiency(const GemmShape& s, const GemmConfigInfo& c, int sms, int splits) {
  // The partial sums cross memory twice (written, read back) against the operands' bytes.
  const double partial = 2.0 * double(splits) * double(s.M) * double(s.N) * 4.0;
  const double operands = (double(s.M) + double(s.N)) * double(s.K) * 2.0;
  return sliced_efficiency(s, c, sms, splits, double(s.K / splits)) / (1.0 + partial / operands) * kReducePassCost;
}

// The slice count (>= kMinReduceSplits) that scores best, or 1 when none may run.
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
// At most kMaxWideSwappedColumns columns of M per wide tile: beyond, other tiles won every
// measured shape but one by 1.5% (809 x 16488 x 1472 on nine 192x96 columns). kWidePrior weighs
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

// A swapped tile holds tile_n of A's rows, so ceil(M / tile_n) tile columns each read all of B.
// One column is the case it is for. A few columns won where K is short (56 x 608 x 936 on four
// 64x16 columns: 0.96x cuBLASLt, the best unswapped tile 0.71x; 309 x 2360 x 560 on five 128x64
// columns: 1.14x) and lost where it is not (116 x 4088 x 6328 on two 64x64 columns: 0.78x against
// 0.99x; 40 x 784 x 16248 on three 64x16 columns 0.59x against one 128x64 column 0.90x; the
// 128x64 tile at M of 2000-2400 and deep K: 0.31-0.49x), and each extra column cost a little even
// where B stays in L2 (24 x 4264 x 696: one 64x32 column 0.96x, two 64x16 columns 0.86x).
constexpr int64_t kMaxSwappedColumns = 5;
constexpr int64_t kMaxSwappedColumnsK = 4096;
constexpr double kSwappedBeyond = 0.30;
constexpr double kExtraColumnCost = 0.03;
constexpr double kL2Bytes = 40.0 * 1024 * 1024;

int64_t swapped_columns(const GemmShape& s, const GemmConfigInfo& c) { return (s.M + c.tile_n - 1) / c.tile_n; }

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

struct Candidate {
  GemmPlan plan;
  double score;
};

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
constexpr double kHbmBytesPerUs = 4.0e6;   // 4 TB/s
constexpr double kSmBytesPerUs = 1.0e5;    // 100 GB/s per CTA streaming its tiles
constexpr double kSmFlopsPerUs = 5.0e6;    // 5 TFLOP/s per SM on bf16 MMA

// Ideal time over predicted time of a swapped config run whole (splits = 1) or in `splits`
// slices with a separate sum.
double swapped_time_score(const GemmShape& s, GemmConfig cfg, int sms, int splits) {
  const GemmConfigInfo& c = config_info(cfg);
  const double wide_rate = wide_swapped_rate(cfg);
  const double sm_rate = wide_rate > 0.0 ? wide_rate : kSmFlopsPerUs;
  const GridCount g = grid_count(s, c, sms);
  const int64_t columns = swapped_columns(s, c);
  const double b_bytes = double(s.N) * double(s.K) * 2.0, a_bytes = double(s.M) * double(s.K) * 2.0;
  const double flops = 2.0 * double(s.M) * double(s.N) * double(s.K);
  const double ideal = kFloorUs + std::max((a_bytes + b_bytes) / kHbmBytesPerUs, flops / (sms * kSmFlopsPerUs));
  const double slice_k = double(s.K) / splits;
  const double unit_bytes = double(c.tile_m + c.tile_n) * slice_k * 2.0;
  const double unit_flops = 2.0 * double(c.tile_m) * double(c.tile_n) * slice_k;
  const double unit_us = std::max(unit_bytes / kSmBytesPerUs, unit_flops / sm_rate);
  const int64_t waves = (g.units * splits + g.slots - 1) / g.slots;
  // Every column reads all of B; from L2 while B fits there, else from memory again.
  const double read_bytes = a_bytes + b_bytes * (b_bytes > kL2Bytes ? double(columns) : 1.0);
  double t = kFloorUs + std::max(read_bytes / kHbmBytesPerUs, double(waves) * unit_us);
  if (splits > 1) t += kReducePassUs + 2.0 * double(splits) * double(s.M) * double(s.N) * 4.0 / kHbmBytesPerUs;
  return ideal / t;
}

// The best work division of one config for the shape: `plain` configs may also split K with a
// separate sum, and those on the stream-K scheduler (`sk`) chain split-K or run stream-K.
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

// ---- plain GEMMs of 64-4095 rows: predicted time --------------------------------------------
// There the grid-fill score above chose poorly: on 140 random shapes of M = 64-16383 (every
// config as the rule runs it alone, `tilelink-bench gemm --alone`; docs/PERF.md, "a time model
// for the plain GEMM's middle rows") its picks ran 0.82x cuBLASLt at 64-511 rows and 0.88x at
// 512-4095 where the best config of each shape ran 0.92x and 0.93x: a ragged last wave costs a
// persistent kernel less than a whole wave (a CTA with one tile left runs it at more than its
// share of the SM), a tile's fixed cost matters on short K loops, and the swapped and unswapped
// tiles' scores were not on one scale. So the plain GEMM compares configs by predicted time,
//     t = launch_us + k_step_us x (full waves + last wave's fill ^ kTailExponent) x K steps
// (a K step: 64 columns, of a slice where K is split) plus, for a split, the summing pass and
// its partial sums' traffic, and for stream-K its fixup. Each config's division is the one its
// score above picks. Fitted by weighted least squares on measured times of 200 random shapes of
// M = 1-16383; out of sample (fitted on half, checked on the other half, five ways) it chose
// 0.887x against the score's 0.816x at 64-511 rows and 0.899x against 0.882x at 512-4095, but
// 0.879x against 0.880x below 64 and 0.904x against 0.932x from 4096 (where the priors were fitted
// to the reference shapes): so it chooses in 64-4095 rows only.
constexpr int64_t kTimedMinRows = 64;
constexpr int64_t kTimedMaxRows = 4095;
constexpr double kTailExponent = 0.25;
constexpr double kSplitPassUs = 4.90;         // the summing pass or the chained fixups
constexpr double kPartialBytesWeight = 0.754;  // x the partial sums' bytes (written, read) at 4 TB/s
constexpr double kStreamKFixupUs = 12.5;
struct PlainTime {
  GemmConfig config;
  double launch_us, k_step_us;  // k_step_us: one K step of a whole wave
};
// Full waves plus the last wave's fill ^ kTailExponent: `work` units on `slots` persistent CTAs.
double waves_with_tail(int64_t work, int64_t slots) {
  const int64_t full = work / slots, rest = work % slots;
  return double(full) + (rest > 0 ? std::pow(double(rest) / double(slots), kTailExponent) : 0.0);
}

constexpr PlainTime kPlainTimes[] = {
    {GemmConfig::coop_128x256_c2x1, 4.33, 0.812}, {GemmConfig::coop_128x256_c1x1, 4.10, 0.903},
    {GemmConfig::pp_128x192_c2x1, 4.58, 0.617},   {GemmConfig::pp_128x128_c2x1, 3.88, 0.470},
    {GemmConfig::pp_128x128_c1x2, 4.06, 0.465},   {GemmConfig::pp_64x128_c2x1, 3.36, 0.294},
    {GemmConfig::sk_128x256_c2x1, 4.83, 0.795},   {GemmConfig::sk_128x128_c1x1, 2.71, 0.571},
    {GemmConfig::skba_128x64_c1x1, 2.25, 0.404},  {GemmConfig::ppba_64x16_c1x1, 2.79, 0.163},
    {GemmConfig::ppba_64x32_c1x1, 2.70, 0.198},   {GemmConfig::ppba_128x96_c1x1, 3.23, 0.462},
    {GemmConfig::ppba_192x96_c1x1, 3.78, 0.601},  {GemmConfig::cpba_128x192_c1x1, 3.24, 0.724},
    {GemmConfig::cpba_256x160_c1x1, 5.40, 1.355},
    // The clustered twins, fitted with the others' constants held, on 60 random shapes of M 64-800
    // (docs/PERF.md, "clustered wide swapped tiles").
    {GemmConfig::ppba_128x96_c1x2, 3.35, 0.391},  {GemmConfig::cpba_128x192_c2x1, 3.58, 0.635},
};

// Predicted microseconds of `plan` on the shape; < 0 for a config without a fitted time.
double plain_time_us(const GemmShape& s, const GemmPlan& plan, int sms) {
  const PlainTime* fit = nullptr;
  for (const PlainTime& t : kPlainTimes)
    if (t.config == plan.config) fit = &t;
  if (fit == nullptr) return -1.0;
  const GridCount g = grid_count(s, config_info(plan.config), sms);
  const double k_steps = double(s.K) / 64.0;
  if (plan.decomposition == Decomposition::stream_k)
    return fit->launch_us + fit->k_step_us * double(g.units) * std::ceil(k_steps) / double(g.slots) + kStreamKFixupUs;
  const int splits = plan.decomposition == Decomposition::data_parallel ? 1 : plan.splits;
  const double waves = waves_with_tail(g.units * splits, g.slots);
  double t = fit->launch_us + fit->k_step_us * waves * std::ceil(k_steps / splits);
  if (splits > 1) {
    const double partial_bytes = 2.0 * splits * double(s.M) * double(s.N) * 4.0;
    t += kSplitPassUs + kPartialBytesWeight * partial_bytes / kHbmBytesPerUs;
  }
  return t;
}

// ---- plain GEMMs of fewer than 64 rows: predicted time of every division ----------------------
// Bound by streaming B (N x K) through narrow swapped tiles. The scores above pick the config
// and the slice count apart, and on three sets of random shapes of M = 1-63 (60, 60 and 82
// shapes, every config at every slice count measured) their picks ran 0.948x, 0.910x and 0.929x
// cuBLASLt where the best measured division of each shape ran 1.007x, 0.964x and 0.979x
// (docs/PERF.md, "a time model for fewer than 64 rows"). So the plain GEMM predicts every
// division of the configs below, whole or in the slice counts split_k_reduce may run,
//     t = launch_us + k_step_us x (full waves + last wave's fill ^ kTailExponent) x K steps
//         + kFewRowsBytesWeight x bytes streamed / HBM rate [+ pass + partial sums' traffic]
// (B is streamed once per tile column where it does not fit in L2), and runs the fastest.
// Fitted by weighted least squares on two of the sets and checked on the third, its picks ran
// 0.982x, 0.936x and 0.936x; the constants below are fitted on all three. The 64x16 variants
// (128-column K tile, 4x1 cluster) and the 128x32 tile are chosen here only.
struct FewRowsTime {
  GemmConfig config;
  double launch_us, k_step_us;  // k_step_us: 64 columns of K, one whole wave
};
constexpr FewRowsTime kFewRowsTimes[] = {
    {GemmConfig::ppba_64x16_c1x1, 2.95, 0.1378},     {GemmConfig::ppba_64x32_c1x1, 3.02, 0.1622},
    {GemmConfig::skba_128x64_c1x1, 2.62, 0.3291},    {GemmConfig::ppba_128x32_c1x1, 3.00, 0.2689},
    {GemmConfig::ppba_64x16x128_c1x1, 2.96, 0.1258}, {GemmConfig::ppba_64x16_c4x1, 2.99, 0.1327},
};
constexpr double kFewRowsBytesWeight = 0.330;   // x the operands' bytes streamed, at 4 TB/s
constexpr double kFewRowsPassUs = 3.34;         // the summing pass
constexpr double kFewRowsPartialWeight = 2.30;  // x the partial sums' bytes (written, read), at 4 TB/s

// Configs the few-rows model alone chooses: its own, less those the scores above have priors for.
bool few_rows_only(GemmConfig cfg) {
  bool timed = false, prior = false;
  for (const FewRowsTime& t : kFewRowsTimes) timed = timed || t.config == cfg;
  for (const Prior& p : kPriors) prior = prior || p.config == cfg;
  return timed && !prior;
}

double few_rows_time_us(const GemmShape& s, const FewRowsTime& fit, int splits, int sms) {
  const GemmConfigInfo& c = config_info(fit.config);
  const GridCount g = grid_count(s, c, sms);
  const double waves = waves_with_tail(g.units * splits, g.slots);
  const int64_t slice_k = splits > 1 ? k_slices(s.K, splits).slice_k : s.K;
  const double k_steps = double((slice_k + c.tile_k - 1) / c.tile_k) * c.tile_k / 64.0;
  const int64_t columns = swapped_columns(s, c);
  const int64_t tile_rows = g.units / columns;  // tiles along B's rows, each reading all of A
  double b_bytes = double(s.N) * double(s.K) * 2.0;
  if (b_bytes > kL2Bytes) b_bytes *= double(columns);
  const double a_bytes = double(s.M) * double(s.K) * 2.0 * double(tile_rows);
  double t = fit.launch_us + fit.k_step_us * waves * k_steps;
  t += kFewRowsBytesWeight * (a_bytes + b_bytes) / kHbmBytesPerUs;
  if (splits > 1) {
    const double partial_bytes = 2.0 * splits * double(s.M) * double(s.N) * 4.0;
    t += kFewRowsPassUs + kFewRowsPartialWeight * partial_bytes / kHbmBytesPerUs;
  }
  return t;
}

// The fastest predicted division among the allowed few-rows configs; nullopt if none is allowed.
std::optional<GemmPlan> few_rows_plan(const GemmShape& s, uint64_t allowed, int sms) {
  std::optional<GemmPlan> best;
  double best_us = 0.0;
  for (const FewRowsTime& fit : kFewRowsTimes) {
    const GemmConfigInfo& c = config_info(fit.config);
    if (!(allowed & config_bit(fit.config)) || c.cluster_m * c.cluster_n > sms) continue;
    auto consider = [&](GemmPlan plan, double us) {
      if (!best || us < best_us * (1.0 - 1e-9)) best = plan, best_us = us;
    };
    consider(GemmPlan{fit.config}, few_rows_time_us(s, fit, 1, sms));
    const ReduceSplits split =
        best_reduce_splits(s, c, sms, [&](int splits) { return 1.0 / few_rows_time_us(s, fit, splits, sms); });
    if (split.splits >= 2) {
      const GemmPlan sliced{fit.config, Raster::along_n, 1, Decomposition::split_k_reduce, split.splits};
      consider(sliced, 1.0 / split.score);
    }
  }
  return best;
}

// The SMs a budget stands for: itself, or (<= 0) the current device's — the cached count, not a
// driver query each time (the plain GEMM plans every call); without a usable device (a CPU-only
// caller planning ahead), an H100/H200's 132.
int budget_sms(int sm_budget) {
  if (sm_budget > 0) return sm_budget;
  int device = 0;
  return cudaGetDevice(&device) == cudaSuccess ? detail::device_sm_count(device) : 132;
}

}  // namespace

GemmPlan choose_config(const GemmShape& shape, DType /*dtype*/, int sm_budget, uint64_t allowed, PlanUse use) {
  const GemmShape s = packed(shape);
  const int sms = budget_sms(sm_budget);
  TL_REQUIRE(allowed != 0, "gemm: choose_config with an empty config mask");
  if (s.M <= 0 || s.N <= 0) return GemmPlan{};  // nothing to compute: any plan launches nothing
  const bool timed = use == PlanUse::plain && s.M >= kTimedMinRows && s.M <= kTimedMaxRows;
  // Below 64 rows the plain GEMM takes the few-rows model's plan when one of its configs is allowed.
  std::optional<GemmPlan> few =
      use == PlanUse::plain && s.M < kTimedMinRows ? few_rows_plan(s, allowed, sms) : std::nullopt;
  Candidate best{GemmPlan{}, -1.0};
  double best_us = -1.0;
  for (int i = 0; i < kNumGemmConfigs && !few; ++i) {
    const GemmConfigInfo& c = kGemmConfigInfo[i];
    if (!(allowed & (uint64_t(1) << i))) continue;
    if (c.cluster_m * c.cluster_n > sms || few_rows_only(static_cast<GemmConfig>(i))) continue;
    const Candidate cand = best_division(s, static_cast<GemmConfig>(i), sms);
    const double us = timed && cand.score > 0.0 ? plain_time_us(s, cand.plan, sms) : -1.0;
    if (us > 0.0) {
      // Timed candidates beat untimed ones (configs outside kPlainTimes: the sweep set).
      if (best_us < 0.0 || us < best_us * (1.0 - 1e-9)) best = cand, best_us = us;
    } else if (best_us < 0.0 && cand.score > best.score + 1e-9) {
      best = cand;
    }
  }
  // The few-rows configs outside their band: only when nothing else is allowed (a one-config mask).
  if (!few && best.score < 0) few = few_rows_plan(s, allowed, sms);
  TL_REQUIRE(best.score >= 0 || few, "gemm: no allowed config fits an SM budget of ", sms);
  GemmPlan plan = few ? *few : best.plan;
  const GemmConfigInfo& chosen = config_info(plan.config);
  if (use == PlanUse::plain) {
    // Walk the shorter tile dimension first: a wave then holds every tile that shares a slice of
    // the larger operand, which is read from memory once. Swizzle 1: wider groups lost up to
    // half the speed on some random shapes and won little on the others (docs/PERF.md).
    const KernelDims d = kernel_dims(s, chosen);
    const int64_t tiles_m = (d.m + chosen.tile_m - 1) / chosen.tile_m, tiles_n = (d.n + chosen.tile_n - 1) / chosen.tile_n;
    plan.raster = tiles_n > tiles_m ? Raster::along_m : Raster::along_n;
    plan.swizzle = 1;
    return plan;
  }
  // Fused ops: the sweep's most robust setting per kernel (geometric mean and worst case over the
  // reference shapes, docs/GEMM.md): along_n with swizzle 2 (0.96-0.99 mean, >= 0.80 worst),
  // except the 1x2-cluster ping-pong, which prefers along_m (0.978 mean).
  plan.raster = chosen.schedule == GemmSchedule::pp && chosen.cluster_n > 1 ? Raster::along_m : Raster::along_n;
  // One row of clusters (decode-sized M): swizzle 2 left half the persistent grid idle there
  // (M = 256, pp_128x128_c2x1: 0.61x cuBLAS with swizzle 2, 0.93x with 1). Split and stream-K
  // grids are short by construction: no swizzle.
  const bool one_cluster_row = kernel_dims(s, chosen).m <= int64_t(chosen.tile_m) * chosen.cluster_m;
  plan.swizzle = one_cluster_row || plan.decomposition != Decomposition::data_parallel ? 1 : 2;
  return plan;
}

// ---- workspace -------------------------------------------------------------------------------
size_t gemm_workspace_bytes(const GemmShape& shape, DType dtype, const GemmPlan& plan, int sm_budget) {
  if (config_info(plan.config).set != GemmConfigSet::plain) return 0;
  const GemmLaunchOptions opt = launch_options(plan, sm_budget);
  switch (plan.config) {
#define TILELINK_GEMM_X_WS_plain(name)                                                          \
  case GemmConfig::name:                                                                        \
    return dtype == DType::bf16 ? detail::workspace_bytes_of<__nv_bfloat16, GemmConfig::name>(shape, opt) \
                                : detail::workspace_bytes_of<__half, GemmConfig::name>(shape, opt);
#define TILELINK_GEMM_X_WS_lib(name)
#define TILELINK_GEMM_X_WS_sweep(name)
#define TILELINK_GEMM_X_WS(name, sched, tm, tn, tk, cm, cn, st, en, ops, set) TILELINK_GEMM_X_WS_##set(name)
    TILELINK_GEMM_CONFIGS(TILELINK_GEMM_X_WS)
#undef TILELINK_GEMM_X_WS
#undef TILELINK_GEMM_X_WS_plain
#undef TILELINK_GEMM_X_WS_lib
#undef TILELINK_GEMM_X_WS_sweep
    default:
      fail_config_not_in_set(plan.config, "gemm_workspace_bytes (`sk` configs are compiled as `plain`)");
  }
}

namespace detail {
namespace {
// The engine's own pool per device: stream-ordered, and it keeps what it has (release threshold
// unlimited) so a launch after a synchronisation does not map memory again. Its own pool, not
// the device's default one, so the program's allocator settings are left alone.
cudaMemPool_t engine_pool(int device) {
  static std::mutex mutex;
  static cudaMemPool_t pools[64] = {};
  TL_REQUIRE(device >= 0 && device < 64, "gemm: device ", device, " out of range for the workspace pool");
  std::lock_guard<std::mutex> lock(mutex);
  if (pools[device] == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    cudaError_t e = cudaMemPoolCreate(&pool, &props);
    TL_REQUIRE(e == cudaSuccess, "gemm: cudaMemPoolCreate failed: ", cudaGetErrorString(e));
    uint64_t keep = UINT64_MAX;
    e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    TL_REQUIRE(e == cudaSuccess, "gemm: cudaMemPoolSetAttribute failed: ", cudaGetErrorString(e));
    pools[device] = pool;
  }
  return pools[device];
}
}  // namespace

LaunchWorkspace::LaunchWorkspace(size_t bytes, void* caller, size_t caller_bytes, cudaStream_t stream,
                                 const char* who)
    : stream_(stream) {
  if (bytes == 0) return;
  if (caller != nullptr) {
    TL_REQUIRE(caller_bytes >= bytes && reinterpret_cast<uintptr_t>(caller) % 128 == 0, "gemm[", who,
               "]: the workspace must be 128-byte aligned and hold ", bytes, " bytes (got ", caller_bytes,
               "; gemm_workspace_bytes says how much)");
    ptr_ = caller;
    return;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &capture);
  TL_REQUIRE(e == cudaSuccess, "gemm[", who, "]: cudaStreamIsCapturing failed: ", cudaGetErrorString(e));
  if (capture == cudaStreamCaptureStatusActive) {
    e = cudaMallocAsync(&ptr_, bytes, stream);  // a graph allocation, owned by the graph's replays
  } else {
    e = cudaMallocFromPoolAsync(&ptr_, bytes, engine_pool(current_device_or_throw(who)), stream);
  }
  TL_REQUIRE(e == cudaSuccess, "gemm[", who, "]: cannot allocate a ", bytes,
             "-byte split-K workspace: ", cudaGetErrorString(e));
  owned_ = true;
}

LaunchWorkspace::~LaunchWorkspace() {
  if (owned_) (void)cudaFreeAsync(ptr_, stream_);
}
}  // namespace detail
// ---- run-time dtype entry point ----------------------------------------------------------
namespace detail {

GemmPlan plain_plan(const GemmShape& shape, DType dtype, int sm_budget) {
  const GemmShape s = packed(shape);
  const int sms = budget_sms(sm_budget);
  struct Entry {
    int64_t key[7];
    GemmPlan plan;
  };
  const int64_t key[7] = {s.M, s.N, s.K, s.lda, s.ldb, s.ldd, sms};
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the key
  for (int64_t v : key) h = (h ^ uint64_t(v)) * 1099511628211ull;
  thread_local Entry cache[16] = {};  // an all-zero key is never a real one (sms >= 1)
  Entry& e = cache[h % 16];
  if (std::memcmp(e.key, key, sizeof key) != 0) {
    e.plan = choose_config(s, dtype, sms, kPlainConfigMask, PlanUse::plain);
    std::memcpy(e.key, key, sizeof key);
  }
  return e.plan;
}

}  // namespace detail

void gemm(DType dtype, const void* A, const void* B, void* D, const GemmShape& shape, const GemmPlan* plan,
          int sm_budget, cudaStream_t stream) {
  const GemmPlan p = plan ? *plan : detail::plain_plan(shape, dtype, sm_budget);
  switch (dtype) {
    case DType::bf16: {
      GemmArgs<__nv_bfloat16> a{static_cast<const __nv_bfloat16*>(A), static_cast<const __nv_bfloat16*>(B),
                                static_cast<__nv_bfloat16*>(D), shape};
      run_gemm(a, NoHooks{}, p, sm_budget, stream);
      return;
    }
    case DType::fp16: {
      GemmArgs<__half> a{static_cast<const __half*>(A), static_cast<const __half*>(B), static_cast<__half*>(D),
                         shape};
      run_gemm(a, NoHooks{}, p, sm_budget, stream);
      return;
    }
  }
  ::tilelink::detail::fail("gemm: unsupported dtype ", static_cast<int>(dtype), " (bf16 and fp16 only)");
}

}  // namespace tilelink::gemm
