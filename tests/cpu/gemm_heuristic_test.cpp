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
