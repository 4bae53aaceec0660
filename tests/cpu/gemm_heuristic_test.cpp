// The GEMM engine's config choice (src/gemm/heuristic/) on the shapes it was fitted to: the
// reference TP shapes, decode-sized M and random shapes measured with every config alone
// (docs/PERF.md); the grouped GEMM's tile rule. Pure host logic: runs without a GPU (the SM
// budget is given, so no device is queried). The time models' terms are pinned in
// gemm_time_models_test.cpp; plans, their text and what tuning times in gemm_plans_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tilelink/core/error.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/gemm/grouped.hpp"
#include "gemm/heuristic/time_models.hpp"

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
// across idle SMs; a few rows swap operands so the MMA tiles hold weight rows.
g::GemmPlan plain(int64_t m, int64_t n, int64_t k, int sms = 132) {
  return g::choose_config(g::packed({m, n, k}), DType::bf16, sms, g::kPlainConfigMask, g::PlanUse::plain);
}

bool tile_64x16(const g::GemmConfigInfo& c) {
  return c.operands == g::GemmOperands::ba && c.tile_m == 64 && c.tile_n == 16;
}

TEST(GemmHeuristic, FewRowsTakeANarrowSwappedTile) {
  // All of M in one column of a swapped tile as narrow as M, 64 weight rows per tile (one of the
  // 64x16 variants): 9 x 9688 x 3480 ran 1.06x cuBLASLt on the 64x16 tile, 0.91x on the 128x64 one.
  EXPECT_TRUE(tile_64x16(g::config_info(plain(9, 9688, 3480).config)));
  EXPECT_EQ(plain(9, 9688, 3480).decomposition, g::Decomposition::data_parallel);
  EXPECT_EQ(plain(24, 4264, 696).config, g::GemmConfig::ppba_64x32_c1x1);
  for (int64_t m : {1, 7, 16, 30, 60, 100, 200})
    for (int64_t n : {512, 4096, 28672})
      for (int64_t k : {512, 4096, 16384}) {
        const auto& c = g::config_info(plain(m, n, k).config);
        if (c.operands != g::GemmOperands::ba || n * k < 4096 * 4096) continue;
        // A large B is not read by more than four tile columns: each reads all of it again.
        EXPECT_LE((m + c.tile_n - 1) / c.tile_n, 4) << m << "x" << n << "x" << k << " " << c.name;
      }
  // B larger than L2 is not read again per column: 48 x 1944 x 16936 (66 MB) takes one column
  // (measured 0.79x; three 64x16 columns 0.51x).
  const auto& deep = g::config_info(plain(48, 1944, 16936).config);
  EXPECT_EQ(deep.operands, g::GemmOperands::ba);
  EXPECT_GE(deep.tile_n, 48);
}

TEST(GemmHeuristic, ShortGridsSplitKAcrossIdleSms) {
  // M = 5, N = 2048, K = 16384: 32 swapped tiles of 64 weight rows, each streaming 2 MB of B
  // whole (~21 us at a CTA's ~100 GB/s); 3 slices with a separate sum stream all of B (67 MB) at
  // the memory's rate, which more slices cannot beat.
  const g::GemmPlan p = plain(5, 2048, 16384);
  EXPECT_TRUE(tile_64x16(g::config_info(p.config)));
  EXPECT_EQ(p.decomposition, g::Decomposition::split_k_reduce);
  EXPECT_GE(p.splits, 3);
  EXPECT_LE(p.splits, 4);
  EXPECT_EQ(p.swizzle, 1);
  // Enough tiles to saturate memory run whole (6 x 1560 x 3568, 25 tiles: 8.2 us whole, 9.8 us
  // and more in any number of slices).
  EXPECT_EQ(plain(6, 1560, 3568).decomposition, g::Decomposition::data_parallel);
  // K / 8 with no divisor in range splits all the same, the last columns left to the summing pass:
  // 13424 / 8 = 2 x 839, 30 x 288 x 6088 (6088 / 8 = 761, prime).
  for (const g::GemmPlan& q : {plain(5, 488, 13424), plain(30, 288, 6088)}) {
    EXPECT_EQ(q.decomposition, g::Decomposition::split_k_reduce);
    EXPECT_GE(q.splits, 3);
  }
  // Shallow K is not split, however short the grid: splitting costs more than the idle SMs
  // (measured: no gain at K <= 4096 even on 7 tiles with the chained fixup).
  EXPECT_EQ(plain(5, 2048, 1536).decomposition, g::Decomposition::data_parallel);
  // Rows beyond a few narrow columns do not take a swapped tile.
  EXPECT_NE(g::config_info(plain(2324, 1704, 19912).config).operands, g::GemmOperands::ba);
}

// Tens to a few hundred rows: the wide swapped tiles, where the unswapped ones pad M and their tile
// count along N alone sets the waves.
bool wide_swapped(const g::GemmConfigInfo& c) {
  return c.operands == g::GemmOperands::ba && c.tile_m >= 128 && c.tile_n >= 96;
}

TEST(GemmHeuristic, TensToHundredsOfRowsTakeAWideSwappedTile) {
  // Measured (tilelink-bench gemm --divisions): 85 x 26984 x 1120 on one 128x96 column 1.02x
  // cuBLASLt, the best unswapped tile 0.90x; 96 x 5360 x 12432 in 3 slices 1.01x (0.84x unswapped).
  EXPECT_EQ(plain(85, 26984, 1120).config, g::GemmConfig::ppba_128x96_c1x1);
  const g::GemmPlan deep = plain(96, 5360, 12432);
  EXPECT_EQ(deep.config, g::GemmConfig::ppba_128x96_c1x1);
  EXPECT_EQ(deep.decomposition, g::Decomposition::split_k_reduce);
  // Thousands of rows keep the unswapped tiles.
  EXPECT_FALSE(wide_swapped(g::config_info(plain(2000, 8192, 8192).config)));
}

// split_k_reduce's slices are whole 8-element steps from column 0; what is left over is shorter
// than one step per slice, and slices plus tail are exactly K.
TEST(GemmHeuristic, KSlicesCoverKInWholeStepsWithAShortTail) {
  for (int64_t k = 8; k <= 40000; k += 8)
    for (int splits : {2, 3, 5, 7, 16, 32}) {
      if (k < 8 * splits) continue;
      const g::KSlices cut = g::k_slices(k, splits);
      ASSERT_EQ(cut.slice_k % 8, 0) << k << " / " << splits;
      ASSERT_GE(cut.slice_k, 8) << k << " / " << splits;
      ASSERT_EQ(cut.slice_k * splits + cut.tail, k) << k << " / " << splits;
      ASSERT_GE(cut.tail, 0) << k << " / " << splits;
      ASSERT_LT(cut.tail, 8 * splits) << k << " / " << splits;
      ASSERT_EQ(cut.tail % 8, 0) << k << " / " << splits;
    }
  EXPECT_EQ(g::k_slices(6088, 4).slice_k, 1520);  // K / 8 = 761, prime: 4 slices and 8 columns over
  EXPECT_EQ(g::k_slices(6088, 4).tail, 8);
  EXPECT_EQ(g::k_slices(4104, 9).tail, 0);
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
          if (c.set != g::GemmConfigSet::plain) EXPECT_EQ(p.decomposition, g::Decomposition::data_parallel);
          if (c.schedule != g::GemmSchedule::sk) {
            EXPECT_NE(p.decomposition, g::Decomposition::split_k);
            EXPECT_NE(p.decomposition, g::Decomposition::stream_k);
          }
          if (p.decomposition != g::Decomposition::split_k && p.decomposition != g::Decomposition::split_k_reduce)
            continue;
          ++splits_seen;
          EXPECT_GE(p.splits, 2);
          EXPECT_LE(p.splits, g::kMaxSplits);
          if (p.decomposition == g::Decomposition::split_k) {  // chained: few, long slices
            EXPECT_LE(p.splits, 4);
            EXPECT_GE(k, 8192) << m << "x" << n << "x" << k;
            EXPECT_GE(k / p.splits, 2048) << m << "x" << n << "x" << k;
          } else {  // a separate sum: at least 3 whole 8-element slices of >= 256, a short tail
            EXPECT_GE(p.splits, 3) << m << "x" << n << "x" << k;
            const g::KSlices cut = g::k_slices(k, p.splits);
            EXPECT_EQ(cut.slice_k % 8, 0);
            EXPECT_GE(cut.slice_k, 256) << m << "x" << n << "x" << k;
            EXPECT_LT(cut.tail, 8 * p.splits);
            EXPECT_LE(double(cut.tail) * double(m) * double(n), 4.0 * 1024 * 1024) << m << "x" << n << "x" << k;
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
  // Decode-sized M keeps the 64x128 tile in the plain set too: its 2x2-cluster twin would hold
  // the 128 x 8192 output in 32 clusters of four, two waves of the 30 that fit.
  EXPECT_EQ(plain(128, 8192, 3584).config, g::GemmConfig::pp_64x128_c2x1);
  EXPECT_EQ(plan(128, 8192, 3584).config, g::GemmConfig::pp_64x128_c2x1);
}

// Between 64 and 4095 rows the plain GEMM compares predicted times. Each shape below was measured
// (every config as the rule runs it alone, against cuBLASLt): the grid-fill score's pick, then
// the predicted-time pick, which was the fastest config measured.
TEST(GemmHeuristic, MidSizedRowsChooseByPredictedTime) {
  // 177 x 32152 x 1616: pp_128x128_c2x1 0.63x, the wide swapped 128x192 tile 1.03x, and in a
  // 2x1 cluster (A's rows multicast to two weight tiles) 1.02x (1.01x unclustered in that run).
  EXPECT_EQ(plain(177, 32152, 1616).config, g::GemmConfig::cpba_128x192_c2x1);
  // The clustered 128x96 tile where M spans two columns: 184 x 5992 x 1848 and 179 x 8008 x 3896
  // ran 1.28x and 1.35x faster in a 1x2 cluster (each weight tile multicast to two column tiles
  // of A's rows) than unclustered; the 2x2 cluster (A's rows multicast too) ran 1.07x faster than
  // the 1x2 over 60 random shapes of M 64-4095 — where its clusters fit one wave of 30: 24 of
  // them on the first shape, 32 (two waves) on the second.
  EXPECT_EQ(plain(184, 5992, 1848).config, g::GemmConfig::ppba_128x96_c2x2);
  EXPECT_EQ(plain(179, 8008, 3896).config, g::GemmConfig::ppba_128x96_c1x2);
  // 287 x 5760 x 23488: pp_128x192_c2x1 0.51x, swapped 192x96 0.83x; in 2x2 clusters the
  // 128x192 tile fills one wave of 30 (2 x 15), the model's pick now (not measured here).
  EXPECT_EQ(plain(287, 5760, 23488).config, g::GemmConfig::pp_128x192_c2x2);
  // 454 x 9488 x 3208: pp_64x128_c2x1 0.54x, pp_128x192_c2x1 0.77x; its 2x2 twin, which reads
  // a quarter less from L2 a step, is the model's pick now (not measured here).
  EXPECT_EQ(plain(454, 9488, 3208).config, g::GemmConfig::pp_128x192_c2x2);
  // 2293 x 6464 x 2696: pp_128x128_c2x1 0.89x, pp_128x192_c2x1 1.04x; the model now picks the
  // 128x256 tile in 2x2 clusters (not measured here).
  EXPECT_EQ(plain(2293, 6464, 2696).config, g::GemmConfig::coop_128x256_c2x2);
  // 377 x 352 x 640: the 128x96 swapped tile 0.78x, the narrow 64x32 one over 12 columns 1.14x;
  // the model's pick now is that tile in 1x4 clusters (each weight tile multicast to four
  // columns; not measured here). Measured alone: 463 x 264 x 3168 and 509 x 360 x 2568 ran 0.59x
  // and 0.84x on the unclustered 64x32 tile, 1.08x and 1.31x in 1x4 clusters; 306 x 272 x 4520
  // 0.71x on skba_128x64_c1x1 in 8 slices, 1.11x on the 64x16 tile in 1x4 clusters.
  EXPECT_EQ(plain(377, 352, 640).config, g::GemmConfig::ppba_64x32_c1x4);
  EXPECT_EQ(plain(463, 264, 3168).config, g::GemmConfig::ppba_64x32_c1x4);
  EXPECT_EQ(plain(509, 360, 2568).config, g::GemmConfig::ppba_64x32_c1x4);
  EXPECT_EQ(plain(306, 272, 4520).config, g::GemmConfig::ppba_64x16_c1x4);
  // Tens to hundreds of rows, N of a few thousand: the 64x64 tile in a 2x4 cluster (each A tile
  // multicast to four weight tiles, each B tile to two row tiles). Measured alone: 121 x 2960 x
  // 2968 1.34x cuBLASLt where the best other config ran 1.02x, 84 x 2680 x 2896 1.08x (0.80x).
  // Its constants were fitted on M <= 511 only: above, the model does not time it.
  EXPECT_EQ(plain(121, 2960, 2968).config, g::GemmConfig::pp_64x64_c2x4);
  EXPECT_EQ(plain(84, 2680, 2896).config, g::GemmConfig::pp_64x64_c2x4);
  for (int64_t m : {512, 1000, 3000, 8192}) EXPECT_NE(plain(m, 2960, 2968).config, g::GemmConfig::pp_64x64_c2x4) << m;
  // Narrow N, M in the thousands: the wide swapped tiles over many columns of M (one wave of
  // them holds all of B's few weight tiles), where the unswapped tiles' grid is short.
  // 3058 x 448 x 7584 on 32 columns of the clustered 128x96 tile 1.23x cuBLASLt (1x2), the
  // unswapped pp_128x128_c1x2 1.00x (the model's pick now is the 128x128 tile in 2x2 clusters,
  // 24 of them, one wave; not measured here); 2422 x 832 x 632 on 13 columns of the clustered
  // 128x192 tile 1.15x, sk_128x128_c1x1 0.81x; 2353 x 552 x 2592: 0.79x against
  // pp_128x128_c2x1's 0.65x.
  EXPECT_EQ(plain(3058, 448, 7584).config, g::GemmConfig::pp_128x128_c2x2);
  EXPECT_EQ(plain(2422, 832, 632).config, g::GemmConfig::cpba_128x192_c2x1);
  EXPECT_EQ(plain(2353, 552, 2592).config, g::GemmConfig::ppba_128x96_c1x2);
  // The 2x2 clusters, measured alone (one H100, against cuBLASLt): 143 x 6528 x 1264 0.84x on
  // ppba_128x96_c2x2, 0.74x on its 1x2 twin; 415 x 19472 x 3096 0.84x on pp_128x128_c2x2, 0.79x
  // on coop_128x256_c2x1, 0.91x on the 128x192 tile in 2x2 clusters.
  EXPECT_EQ(plain(143, 6528, 1264).config, g::GemmConfig::ppba_128x96_c2x2);
  EXPECT_EQ(plain(415, 19472, 3096).config, g::GemmConfig::pp_128x192_c2x2);
  // The fused ops keep the measured priors there: the same shape can take another config.
  EXPECT_EQ(g::choose_config(g::packed({2293, 6464, 2696}), DType::bf16, 132, g::kPlainConfigMask).config,
            g::GemmConfig::pp_128x128_c2x1);
}

// From 4096 rows the plain GEMM compares predicted times too (the many-rows constants, with a
// per-wave cost). Each shape was measured with every config as the rule runs it alone (one H100,
// against cuBLASLt): the grid-fill score's pick, then the model's.
TEST(GemmHeuristic, ManyRowsChooseByPredictedTime) {
  // Narrow N. 4606 x 720 x 1768: pp_128x128_c2x1 0.71x, the same tile in 2x2 clusters 0.96x.
  EXPECT_EQ(plain(4606, 720, 1768).config, g::GemmConfig::pp_128x128_c2x2);
  // 5779 x 1744 x 1192: pp_128x128_c2x1 0.76x; 6583 x 296 x 4936: pp_128x192_c2x1 1.13x; the
  // 128x192 tile in 2x2 clusters 1.00x and 1.42x.
  EXPECT_EQ(plain(5779, 1744, 1192).config, g::GemmConfig::pp_128x192_c2x2);
  EXPECT_EQ(plain(6583, 296, 4936).config, g::GemmConfig::pp_128x192_c2x2);
  // 15521 x 1600 x 3616: pp_128x128_c2x1 0.81x, the 128x192 tile 0.89x.
  EXPECT_EQ(plain(15521, 1600, 3616).config, g::GemmConfig::pp_128x192_c2x1);
  // Wide N, deep K: the cooperative 128x256 tile, its epilogue paid once a wave over many K steps.
  // 14111 x 9424 x 16728: pp_128x192_c2x1 0.69x -> 0.86x; 4701 x 29984 x 8360: 0.84x -> 0.98x.
  EXPECT_EQ(plain(14111, 9424, 16728).config, g::GemmConfig::coop_128x256_c2x1);
  EXPECT_EQ(plain(4701, 29984, 8360).config, g::GemmConfig::coop_128x256_c2x1);
  // Wide N, short K: the ping-pong 128x192 tile, which hides its epilogue. The reference GEMM-RS
  // shape 8192 x 4096 x 1376: pp_128x128_c2x1 0.92-0.95x, the 128x192 tile 1.04x (the
  // cooperative 128x256 0.98x).
  EXPECT_EQ(plain(8192, 4096, 1376).config, g::GemmConfig::pp_128x192_c2x1);
  EXPECT_EQ(plain(11807, 3664, 736).config, g::GemmConfig::pp_128x192_c2x1);
  // The fused ops choose as before.
  EXPECT_EQ(plan(4606, 720, 1768).config, g::GemmConfig::pp_128x128_c2x1);
  EXPECT_EQ(plan(8192, 4096, 1376).config, g::GemmConfig::pp_128x128_c2x1);
}

// Below 64 rows the plain GEMM predicts every division of the narrow swapped tiles (whole, or
// 3-32 slices with a separate sum) and runs the fastest. Measured on one H200 against cuBLASLt,
// every config at every slice count (docs/PERF.md, "a time model for fewer than 64 rows").
TEST(GemmHeuristic, FewRowsChooseConfigAndSlicesByPredictedTime) {
  // 2 x 664 x 6216: 11 tiles of 64 weight rows; whole 13.7 us, 12 slices 7.9 us (cuBLASLt 7.0).
  const g::GemmPlan shallow = plain(2, 664, 6216);
  EXPECT_TRUE(tile_64x16(g::config_info(shallow.config)));
  EXPECT_EQ(shallow.decomposition, g::Decomposition::split_k_reduce);
  EXPECT_GE(shallow.splits, 8);
  // 39 x 7232 x 9128 (B 132 MB, past L2, read again by every tile column): two 64x16 columns
  // 76-84 us, two 128x32 ones 61 us, one 128x64 column 49 us whole (cuBLASLt 37).
  const g::GemmPlan deep = plain(39, 7232, 9128);
  EXPECT_EQ(deep.config, g::GemmConfig::skba_128x64_c1x1);
  EXPECT_EQ(deep.decomposition, g::Decomposition::data_parallel);
  // 10 x 7664 x 10120: 120 tiles, a whole wave: not split (42-44 us whole, 47-52 split).
  EXPECT_EQ(plain(10, 7664, 10120).decomposition, g::Decomposition::data_parallel);
  // Where M spans two to four 16-row columns, a weight tile multicast to them (one H100, each
  // config as the rule runs it alone): 45 x 392 x 3016 and 58 x 1392 x 1680 ran 0.95x and 1.11x
  // cuBLASLt in 1x4 clusters, 0.87x and 1.02x at best unclustered (pp_64x128_c2x2 in 11 slices,
  // ppba_64x32_c1x1); 25 x 480 x 2360 1.03x in a 1x2 cluster and 1.00x in 1x4, 0.92x at best
  // unclustered (ppba_64x16_c4x1).
  EXPECT_EQ(plain(45, 392, 3016).config, g::GemmConfig::ppba_64x16_c1x4);
  EXPECT_EQ(plain(58, 1392, 1680).config, g::GemmConfig::ppba_64x16_c1x4);
  const g::GemmConfig two_columns = plain(25, 480, 2360).config;
  EXPECT_TRUE(two_columns == g::GemmConfig::ppba_64x16_c1x2 || two_columns == g::GemmConfig::ppba_64x16_c1x4)
      << g::config_name(two_columns);
  // The variants are the plain GEMM's alone: the fused ops' rule does not know them, and with
  // every plain config allowed it keeps its own pick. The clusters along A's rows are timed from
  // 64 rows too, by the time models only.
  const g::GemmConfig clustered[] = {g::GemmConfig::ppba_64x16_c1x2, g::GemmConfig::ppba_64x16_c1x4,
                                     g::GemmConfig::ppba_64x32_c1x4};
  for (g::GemmConfig c : clustered) EXPECT_TRUE(g::heuristic::timed_only(c)) << g::config_name(c);
  for (int64_t m : {1, 9, 33, 63})
    for (int64_t k : {1024, 16384}) {
      const g::GemmConfig f = g::choose_config(g::packed({m, 4096, k}), DType::bf16, 132, g::kPlainConfigMask).config;
      EXPECT_NE(f, g::GemmConfig::ppba_64x16x128_c1x1);
      EXPECT_NE(f, g::GemmConfig::ppba_64x16_c4x1);
      EXPECT_NE(f, g::GemmConfig::ppba_128x32_c1x1);
      for (g::GemmConfig c : clustered) EXPECT_NE(f, c);
    }
  // Allowed alone, a variant still gets a plan at any size (a benchmark of one config).
  for (int64_t m : {7, 500, 8000})
    EXPECT_EQ(g::choose_config(g::packed({m, 4096, 4096}), DType::bf16, 132,
                               g::config_bit(g::GemmConfig::ppba_64x16_c4x1), g::PlanUse::plain)
                  .config,
              g::GemmConfig::ppba_64x16_c4x1);
}

// The 2x2-cluster tiles have no score prior: the plain GEMM chooses them only at rows where a time
// model has their constants, the fused ops' rule never, and a mask of one of them alone still plans.
TEST(GemmHeuristic, TwoByTwoClustersOnlyWhereATimeModelChooses) {
  const g::GemmConfig twos[] = {g::GemmConfig::pp_64x128_c2x2, g::GemmConfig::pp_128x128_c2x2,
                                g::GemmConfig::ppba_128x96_c2x2, g::GemmConfig::pp_128x192_c2x2,
                                g::GemmConfig::coop_128x256_c2x2};
  for (g::GemmConfig c : twos) {
    EXPECT_TRUE(g::heuristic::timed_only(c)) << g::config_name(c);
    EXPECT_EQ(g::config_info(c).cluster_m * g::config_info(c).cluster_n, 4);
  }
  for (int64_t m : {1, 17, 63, 64, 700, 4095, 4096, 9000, 16384})
    for (int64_t n : {256, 2048, 12288})
      for (int64_t k : {512, 4096, 16384}) {
        const g::GemmShape s = g::packed({m, n, k});
        const g::GemmConfig plain_pick = plain(m, n, k).config;
        const g::GemmConfig fused_pick = g::choose_config(s, DType::bf16, 132, g::kPlainConfigMask).config;
        for (g::GemmConfig c : twos) {
          EXPECT_NE(fused_pick, c) << m << "x" << n << "x" << k;
          if (!g::heuristic::config_time(g::heuristic::plain_time_model(m), c))
            EXPECT_NE(plain_pick, c) << m << "x" << n << "x" << k;
        }
      }
  for (g::GemmConfig c : twos)
    for (int64_t m : {7, 500, 8000}) {
      EXPECT_EQ(g::choose_config(g::packed({m, 4096, 4096}), DType::bf16, 132, g::config_bit(c), g::PlanUse::plain)
                    .config,
                c);
      // Below four SMs no 2x2 cluster fits: a clear error, not a plan that cannot launch.
      EXPECT_THROW(g::choose_config(g::packed({m, 4096, 4096}), DType::bf16, 3, g::config_bit(c), g::PlanUse::plain),
                   tilelink::Error);
    }
}

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
