// The GEMM engine's config choice (src/gemm/gemm.cpp) on the shapes it was fitted to: the
// reference TP shapes and decode-sized M (docs/PERF.md). Pure host logic: runs without a GPU
// (the SM budget is given, so no device is queried).
#include <gtest/gtest.h>

#include "tilelink/gemm/gemm.hpp"

namespace g = tilelink::gemm;
using tilelink::DType;

namespace {

g::GemmPlan plan(int64_t m, int64_t n, int64_t k, int sms = 132) {
  return g::choose_config(g::packed({m, n, k}), DType::bf16, sms);
}

TEST(GemmHeuristic, DecodeSizedMUsesSmallTilesAndNoSwizzle) {
  // M = 128: one row of 64-row tiles fills the grid; 128-row clustered tiles would leave half
  // idle. The 2x1 cluster shares each B tile between the two 64-row tiles (0.96x cuBLAS; the 1x2
  // cluster, reading B twice, 0.80x).
  const g::GemmPlan p128 = plan(128, 8192, 3584);
  EXPECT_EQ(p128.config, g::GemmConfig::pp_64x128_c2x1);
  EXPECT_EQ(p128.raster, g::Raster::along_n);
  EXPECT_EQ(p128.swizzle, 1);
  // Fewer N tiles (decode AG-GEMM, N = 28672 / 8): 64-row tiles still, 0.93x vs 0.69x for the 1x2 cluster.
  EXPECT_EQ(plan(256, 3584, 8192).config, g::GemmConfig::pp_64x128_c2x1);
  // M = 256: one row of 2x1 clusters of 128x128 tiles; swizzle 2 there idled half the grid
  // (0.61x cuBLAS measured, 0.93x with swizzle 1).
  const g::GemmPlan p256 = plan(256, 8192, 3584);
  EXPECT_EQ(p256.config, g::GemmConfig::pp_128x128_c2x1);
  EXPECT_EQ(p256.swizzle, 1);
}

TEST(GemmHeuristic, ReferenceShapesKeepTheFittedChoice) {
  // docs/PERF.md "GEMM engine with the library heuristic".
  EXPECT_EQ(plan(8192, 1376, 4096).config, g::GemmConfig::pp_128x192_c2x1);
  EXPECT_EQ(plan(8192, 1792, 4096).config, g::GemmConfig::pp_128x128_c2x1);
  EXPECT_EQ(plan(8192, 3584, 8192).config, g::GemmConfig::coop_128x256_c2x1);
  EXPECT_EQ(plan(8192, 4096, 1376).config, g::GemmConfig::pp_128x128_c2x1);
  for (const auto& s : {plan(8192, 1376, 4096), plan(8192, 8192, 3584)}) {
    EXPECT_EQ(s.swizzle, 2);
    EXPECT_EQ(s.raster, g::Raster::along_n);
  }
}

TEST(GemmHeuristic, SmallerSmBudgetStillFindsAConfig) {
  // A fused op's GEMM runs on what the communication leaves (e.g. 132 - 48 SMs, or a rank's share
  // of a shared GPU); every budget from one cluster up gets a plan.
  for (int sms : {2, 16, 84, 100, 114}) {
    const g::GemmPlan p = plan(8192, 4096, 1376, sms);
    const auto& c = g::config_info(p.config);
    EXPECT_LE(c.cluster_m * c.cluster_n, sms);
  }
}

// The plain GEMM (lib + plain configs) on short grids: few output tiles and deep K split K
// across idle SMs; a few rows swap operands so the 128-row MMA tiles hold weight rows.
g::GemmPlan plain(int64_t m, int64_t n, int64_t k, int sms = 132) {
  return g::choose_config(g::packed({m, n, k}), DType::bf16, sms, g::kPlainConfigMask, g::PlanUse::plain);
}

TEST(GemmHeuristic, ShortGridsSplitKAcrossIdleSms) {
  // M = 5, N = 2048, K = 16384: 16 swapped tiles of 128 weight rows; 8 slices of 2048, summed in
  // a separate pass, fill 128 SMs.
  const g::GemmPlan p = plain(5, 2048, 16384);
  EXPECT_EQ(p.config, g::GemmConfig::skba_128x64_c1x1);
  EXPECT_EQ(p.decomposition, g::Decomposition::split_k_reduce);
  EXPECT_EQ(p.splits, 8);
  EXPECT_EQ(p.swizzle, 1);
  // K / 8 = 1678 = 2 x 839 has no slice count between 3 and 32: the chained split, at most 4.
  const g::GemmPlan chained = plain(5, 488, 13424);
  EXPECT_EQ(chained.decomposition, g::Decomposition::split_k);
  EXPECT_EQ(chained.splits, 4);
  // Shallow K is not split, however short the grid: splitting costs more than the idle SMs
  // (measured: no gain at K <= 4096 even on 7 tiles with the chained fixup).
  EXPECT_EQ(plain(5, 2048, 1536).decomposition, g::Decomposition::data_parallel);
  // From K = 2048 a separate sum splits a grid of a few tiles: 50 x 648 x 2952 is 6 swapped tiles,
  // K / 8 = 9 x 41: 9 slices of 328 (measured 0.89x cuBLASLt; whole tiles 0.42x).
  const g::GemmPlan sliced = plain(50, 648, 2952);
  EXPECT_EQ(sliced.decomposition, g::Decomposition::split_k_reduce);
  EXPECT_EQ(sliced.splits, 9);
  // ...but never into 2 slices, which lost to whole tiles wherever measured: K / 8 = 2 x 223.
  EXPECT_EQ(plain(6, 1560, 3568).decomposition, g::Decomposition::data_parallel);
  // Rows beyond one 64-wide column do not take the narrow swapped tile.
  EXPECT_NE(plain(2324, 1704, 19912).config, g::GemmConfig::skba_128x64_c1x1);
}

TEST(GemmHeuristic, EverySplitPlanFillsAtMostOneWaveWithDeepEnoughSlices) {
  int splits_seen = 0;
  for (int64_t m : {1, 3, 17, 64, 100, 300, 1000, 3000})
    for (int64_t n : {256, 1000, 4096, 14336})
      for (int64_t k : {256, 1024, 4096, 16384, 32768})
        for (int sms : {16, 78, 132}) {
          const g::GemmPlan p = plain(m, n, k, sms);
          const auto& c = g::config_info(p.config);
          EXPECT_NE(c.set, g::GemmConfigSet::sweep);
          if (c.schedule != g::GemmSchedule::sk) EXPECT_EQ(p.decomposition, g::Decomposition::data_parallel);
          if (p.decomposition != g::Decomposition::split_k && p.decomposition != g::Decomposition::split_k_reduce)
            continue;
          ++splits_seen;
          EXPECT_GE(p.splits, 2);
          EXPECT_LE(p.splits, g::kMaxSplits);
          if (p.decomposition == g::Decomposition::split_k) {  // chained: few, long slices
            EXPECT_LE(p.splits, 4);
            EXPECT_GE(k, 8192) << m << "x" << n << "x" << k;
            EXPECT_GE(k / p.splits, 2048) << m << "x" << n << "x" << k;
          } else {  // a separate sum: at least 3 whole 8-element slices of >= 256
            EXPECT_GE(p.splits, 3) << m << "x" << n << "x" << k;
            EXPECT_EQ(k % (8 * p.splits), 0) << m << "x" << n << "x" << k;
            EXPECT_GE(k / p.splits, 256) << m << "x" << n << "x" << k;
          }
          const bool ba = c.operands == g::GemmOperands::ba;
          const int64_t km = ba ? n : m, kn = ba ? m : n;
          const int64_t units = ((km + c.tile_m * c.cluster_m - 1) / (c.tile_m * c.cluster_m)) *
                                ((kn + c.tile_n * c.cluster_n - 1) / (c.tile_n * c.cluster_n));
          EXPECT_LE(units * p.splits, sms / (c.cluster_m * c.cluster_n)) << m << "x" << n << "x" << k;
        }
  EXPECT_GT(splits_seen, 10);
}

// A plain GEMM walks the shorter side of its tile grid first, so the tiles that share a slice of
// the larger operand run in one wave (mid-sized M on wide N: B read once, not once per row of
// tiles); the fused ops keep their measured order whatever the grid.
TEST(GemmHeuristic, PlainGemmWalksTheShorterTileDimensionFirst) {
  int along_m = 0, along_n = 0;
  for (int64_t m : {1, 7, 64, 300, 1000, 4000, 16000})
    for (int64_t n : {256, 1000, 4096, 22000})
      for (int64_t k : {512, 4096, 20000}) {
        const g::GemmPlan p = plain(m, n, k);
        const auto& c = g::config_info(p.config);
        const bool ba = c.operands == g::GemmOperands::ba;
        const int64_t km = ba ? n : m, kn = ba ? m : n;
        const int64_t tiles_m = (km + c.tile_m - 1) / c.tile_m, tiles_n = (kn + c.tile_n - 1) / c.tile_n;
        EXPECT_EQ(p.raster, tiles_n > tiles_m ? g::Raster::along_m : g::Raster::along_n) << m << "x" << n << "x" << k;
        EXPECT_EQ(p.swizzle, 1) << m << "x" << n << "x" << k;
        (p.raster == g::Raster::along_m ? along_m : along_n) += 1;
        // The same shape for a fused op: the config and division do not depend on the use.
        const g::GemmPlan f = g::choose_config(g::packed({m, n, k}), DType::bf16, 132, g::kPlainConfigMask);
        EXPECT_EQ(f.config, p.config);
        EXPECT_EQ(f.decomposition, p.decomposition);
        EXPECT_EQ(f.splits, p.splits);
      }
  EXPECT_GT(along_m, 10);
  EXPECT_GT(along_n, 10);
  // 346 x 22112: 3 rows of 87 tiles; along N, a wave held two rows and B was read twice.
  EXPECT_EQ(plain(346, 22112, 14160).raster, g::Raster::along_m);
  EXPECT_EQ(plain(8192, 3584, 8192).raster, g::Raster::along_n);
  const g::GemmPlan fused = plan(346, 22112, 14160);
  EXPECT_EQ(fused.raster, g::Raster::along_n);
  EXPECT_EQ(fused.swizzle, 2);
}

TEST(GemmHeuristic, FusedOpsKeepTheirCompiledSet) {
  // The default mask is what the fused ops' hooked kernels exist for: lib configs, whole tiles.
  for (int64_t m : {1, 5, 128, 3000, 8192})
    for (int64_t k : {512, 16384}) {
      const g::GemmPlan p = plan(m, 2048, k);
      EXPECT_EQ(g::config_info(p.config).set, g::GemmConfigSet::lib);
      EXPECT_EQ(p.decomposition, g::Decomposition::data_parallel);
    }
  // Large, full-wave shapes keep the fitted data-parallel choice in the plain set too.
  EXPECT_EQ(plain(8192, 3584, 8192).config, g::GemmConfig::coop_128x256_c2x1);
  EXPECT_EQ(plain(8192, 4096, 1376).config, g::GemmConfig::pp_128x128_c2x1);
  EXPECT_EQ(plain(128, 8192, 3584).config, g::GemmConfig::pp_64x128_c2x1);
}

}  // namespace

#include "tilelink/gemm/grouped.hpp"

namespace {

TEST(GroupedGemmRule, ShortGroupsOrNarrowNTakeTheSmallTiles) {
  using g::GroupedConfig;
  // Average group of <= 128 rows (decode, many experts): 128-row tiles would be mostly padding.
  EXPECT_EQ(g::choose_grouped_config(1024 * 4, 60, 1408, 2048), GroupedConfig::pp_64x128_c1x2);
  EXPECT_EQ(g::choose_grouped_config(8192 * 8, 256 * 8, 512, 7168), GroupedConfig::pp_64x128_c1x2);
  // Tall groups and wide N: the large cooperative tile.
  EXPECT_EQ(g::choose_grouped_config(8192 * 2, 8, 28672, 4096), GroupedConfig::coop_128x256_c2x1);
  // N of one 256-wide tile or less: the 128-wide tiles keep more CTAs busy.
  EXPECT_EQ(g::choose_grouped_config(8192 * 2, 8, 256, 4096), GroupedConfig::pp_64x128_c1x2);
  EXPECT_EQ(g::choose_grouped_config(0, 0, 256, 4096), GroupedConfig::pp_64x128_c1x2);
  EXPECT_EQ(g::grouped_config_tile(GroupedConfig::coop_128x256_c2x1).tile_n, 256);
}

}  // namespace
