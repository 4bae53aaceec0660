// The plain GEMM's time models (src/gemm/heuristic/time_models.*): which model serves which rows,
// and each model's terms worked out by hand on small shapes, since the fitting tool
// (tilelink-gemm-model) and the rule both read them. Pure host logic.
#include <gtest/gtest.h>

#include <cmath>

#include "tilelink/gemm/gemm.hpp"
#include "gemm/heuristic/grid.hpp"
#include "gemm/heuristic/time_models.hpp"

namespace g = tilelink::gemm;
using tilelink::DType;

namespace {

// The plain GEMM's model by its rows: few rows below 64, mid rows to 4095, many rows above.
TEST(GemmTimeModels, ModelByRows) {
  namespace h = g::heuristic;
  EXPECT_EQ(h::plain_time_model(1), h::TimeModel::few_rows);
  EXPECT_EQ(h::plain_time_model(63), h::TimeModel::few_rows);
  EXPECT_EQ(h::plain_time_model(64), h::TimeModel::mid_rows);
  EXPECT_EQ(h::plain_time_model(4095), h::TimeModel::mid_rows);
  EXPECT_EQ(h::plain_time_model(4096), h::TimeModel::many_rows);
  EXPECT_EQ(h::plain_time_model(int64_t(1) << 40), h::TimeModel::many_rows);
}

// The time models' terms, worked out by hand (the fitting tool and the rule both read them).
TEST(GemmTimeModels, TermsOnHandWorkedShapes) {
  namespace h = g::heuristic;
  // 300 x 8192 x 4096 on 2x1 clusters of 128x128 tiles, 132 SMs: 2 x 64 = 128 clusters on 66
  // slots, one full wave and a last wave of 62 / 66; 64 K steps.
  const g::GemmShape s = g::packed({300, 8192, 4096});
  const g::GemmPlan whole{g::GemmConfig::pp_128x128_c2x1};
  h::TimeTerms t = h::time_terms(h::TimeModel::mid_rows, s, whole, 132);
  EXPECT_DOUBLE_EQ(t.waves, 1.0 + std::pow(62.0 / 66.0, 0.25));
  EXPECT_DOUBLE_EQ(t.work, t.waves * 64.0);
  EXPECT_EQ(t.passes, 0.0);
  EXPECT_EQ(t.partial_us, 0.0);
  // In 3 slices with a separate sum: 384 units, 5 full waves and 54 / 66; 22 K steps a slice; the
  // partial sums 2 x 3 x 300 x 8192 x 4 bytes at 4 TB/s.
  const g::GemmPlan sliced{g::GemmConfig::pp_128x128_c2x1, g::Raster::along_n, 1, g::Decomposition::split_k_reduce, 3};
  t = h::time_terms(h::TimeModel::mid_rows, s, sliced, 132);
  EXPECT_DOUBLE_EQ(t.work, (5.0 + std::pow(54.0 / 66.0, 0.25)) * 22.0);
  EXPECT_EQ(t.passes, 1.0);
  EXPECT_DOUBLE_EQ(t.partial_us, 2.0 * 3 * 300 * 8192 * 4 / 4.0e6);
  // Clusters of four fit 30 to a 132-SM GPU (a cluster's CTAs share one GPC), not 132 / 4: the
  // same shape on 2x2 clusters of 128x128 tiles is 2 x 32 = 64 clusters, two full waves of 30
  // and 4 / 30. Within 100 SMs, 25 a wave.
  const g::GemmPlan quad{g::GemmConfig::pp_128x128_c2x2};
  EXPECT_DOUBLE_EQ(h::time_terms(h::TimeModel::mid_rows, s, quad, 132).work,
                   (2.0 + std::pow(4.0 / 30.0, 0.25)) * 64.0);
  EXPECT_DOUBLE_EQ(h::time_terms(h::TimeModel::mid_rows, s, quad, 100).work,
                   (2.0 + std::pow(14.0 / 25.0, 0.25)) * 64.0);
  // Its prediction is the one the rule compares.
  const auto c = h::config_time(h::TimeModel::mid_rows, sliced.config);
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(h::predicted_us(t, *c, h::shared_times(h::TimeModel::mid_rows)), h::plain_time_us(s, sliced, 132));

  // 20 x 8192 x 4096 on swapped 64x16 tiles in 4 slices: 128 x 2 tiles x 4 = 1024 units on 132
  // slots (7 full waves, 100 / 132); 1024 columns of K a slice = 16 steps; B (64 MiB, beyond L2)
  // read once per tile column (2), A once per tile along B's rows (128).
  const g::GemmShape few = g::packed({20, 8192, 4096});
  const g::GemmPlan narrow{g::GemmConfig::ppba_64x16_c1x1, g::Raster::along_n, 1, g::Decomposition::split_k_reduce, 4};
  t = h::time_terms(h::TimeModel::few_rows, few, narrow, 132);
  EXPECT_DOUBLE_EQ(t.work, (7.0 + std::pow(100.0 / 132.0, 0.25)) * 16.0);
  EXPECT_DOUBLE_EQ(t.streamed_us, (8192.0 * 4096 * 2 * 2 + 20.0 * 4096 * 2 * 128) / 4.0e6);
  EXPECT_DOUBLE_EQ(t.partial_us, 2.0 * 4 * 20 * 8192 * 4 / 4.0e6);
  // 44 x 8192 x 4096 whole on the same tile in 1x4 clusters: 3 tile columns of A's rows, one
  // cluster column (each weight tile multicast to its four CTAs), so B is read once, not three
  // times; A once per cluster along B's rows (128); 128 clusters on the 30 slots of clusters of four.
  const g::GemmShape tens = g::packed({44, 8192, 4096});
  const g::GemmPlan clustered{g::GemmConfig::ppba_64x16_c1x4};
  EXPECT_EQ(h::swapped_b_reads(tens, g::config_info(clustered.config)), 1);
  EXPECT_EQ(h::swapped_b_reads(tens, g::config_info(g::GemmConfig::ppba_64x16_c1x1)), 3);
  EXPECT_EQ(h::swapped_b_reads(g::packed({129, 8192, 4096}), g::config_info(g::GemmConfig::ppba_64x32_c1x4)), 2);
  t = h::time_terms(h::TimeModel::few_rows, tens, clustered, 132);
  EXPECT_DOUBLE_EQ(t.work, (4.0 + std::pow(8.0 / 30.0, 0.25)) * 64.0);
  EXPECT_DOUBLE_EQ(t.streamed_us, (8192.0 * 4096 * 2 + 44.0 * 4096 * 2 * 128) / 4.0e6);
  // Stream-K: an equal share of every tile's 64 K steps per slot, and one fixup.
  const g::GemmPlan streamed{g::GemmConfig::sk_128x256_c2x1, g::Raster::along_n, 1, g::Decomposition::stream_k, 1};
  t = h::time_terms(h::TimeModel::mid_rows, g::packed({2048, 8192, 4096}), streamed, 132);
  EXPECT_DOUBLE_EQ(t.work, 8.0 * 32 * 64 / 66);
  EXPECT_DOUBLE_EQ(t.waves, 8.0 * 32 / 66);
  EXPECT_EQ(t.fixups, 1.0);
  // From 4096 rows the same terms, with the many-rows model's constants.
  const g::GemmShape many = g::packed({9000, 8192, 4096});
  const auto cm = h::config_time(h::TimeModel::many_rows, whole.config);
  ASSERT_TRUE(cm.has_value());
  EXPECT_DOUBLE_EQ(h::predicted_us(h::time_terms(h::TimeModel::many_rows, many, whole, 132), *cm,
                                   h::shared_times(h::TimeModel::many_rows)),
                   h::plain_time_us(many, whole, 132));
  EXPECT_DOUBLE_EQ(h::time_terms(h::TimeModel::many_rows, many, whole, 132).work,
                   h::time_terms(h::TimeModel::mid_rows, many, whole, 132).work);
  // The per-wave cost: the many-rows model's cooperative tiles pay one; no config of the other
  // models does.
  const g::GemmPlan coop{g::GemmConfig::coop_128x256_c2x1};
  const h::TimeTerms tc = h::time_terms(h::TimeModel::many_rows, many, coop, 132);
  const auto cc = h::config_time(h::TimeModel::many_rows, coop.config);
  ASSERT_TRUE(cc.has_value());
  EXPECT_GT(cc->wave_us, 1.0);
  EXPECT_DOUBLE_EQ(h::predicted_us(tc, *cc, h::shared_times(h::TimeModel::many_rows)),
                   cc->launch_us + cc->k_step_us * tc.work + cc->wave_us * tc.waves);
  for (h::TimeModel other : {h::TimeModel::few_rows, h::TimeModel::mid_rows})
    for (int i = 0; i < g::kNumGemmConfigs; ++i)
      if (const auto ct = h::config_time(other, static_cast<g::GemmConfig>(i))) EXPECT_EQ(ct->wave_us, 0.0);
  // The models hold constants for their own configs only.
  EXPECT_FALSE(h::config_time(h::TimeModel::few_rows, g::GemmConfig::coop_128x256_c2x1).has_value());
  EXPECT_TRUE(h::config_time(h::TimeModel::few_rows, g::GemmConfig::ppba_64x16_c4x1).has_value());
}

// Constants fitted on a band of rows hold there only: the 2x4-cluster tile's mid-rows constants
// (fitted on 64-511 rows) are looked up to 511 rows and not from 512, where the rule's predicted
// time for it is none (< 0); constants without a bound hold on every row of their model.
TEST(GemmTimeModels, ConstantsHoldOnTheRowsTheyWereFittedOn) {
  namespace h = g::heuristic;
  const g::GemmConfig bounded = g::GemmConfig::pp_64x64_c2x4;
  const auto c = h::config_time(h::TimeModel::mid_rows, bounded);
  ASSERT_TRUE(c.has_value());
  ASSERT_GT(c->max_rows, 0);
  EXPECT_TRUE(h::config_time(h::TimeModel::mid_rows, bounded, c->max_rows).has_value());
  EXPECT_FALSE(h::config_time(h::TimeModel::mid_rows, bounded, c->max_rows + 1).has_value());
  EXPECT_GT(h::plain_time_us(g::packed({c->max_rows, 2960, 2968}), g::GemmPlan{bounded}, 132), 0.0);
  EXPECT_LT(h::plain_time_us(g::packed({c->max_rows + 1, 2960, 2968}), g::GemmPlan{bounded}, 132), 0.0);
  const g::GemmConfig unbounded = g::GemmConfig::ppba_64x16_c1x4;
  ASSERT_EQ(h::config_time(h::TimeModel::mid_rows, unbounded)->max_rows, 0);
  EXPECT_TRUE(h::config_time(h::TimeModel::mid_rows, unbounded, 4095).has_value());
}

}  // namespace
