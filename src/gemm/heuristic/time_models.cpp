// The plain GEMM's predicted times: from 64 rows per config (its division from the score; one set of
// constants to 4095 rows, another above), and below 64 rows for every division of the narrow
// swapped tiles.
#include "time_models.hpp"

#include <cmath>

#include "grid.hpp"
#include "scores.hpp"

namespace tilelink::gemm::heuristic {
namespace {

// ---- plain GEMMs of 64-4095 rows: predicted time --------------------------------------------
// There the grid-fill score (scores.cpp) chose poorly: on 140 random shapes of M = 64-16383 (every
// config as the rule runs it alone, `tilelink-bench gemm --alone`; docs/PERF.md, "a time model
// for the plain GEMM's middle rows") its picks ran 0.82x cuBLASLt at 64-511 rows and 0.88x at
// 512-4095 where the best config of each shape ran 0.92x and 0.93x: a ragged last wave costs a
// persistent kernel less than a whole wave (a CTA with one tile left runs it at more than its
// share of the SM), a tile's fixed cost matters on short K loops, and the swapped and unswapped
// tiles' scores were not on one scale. So the plain GEMM compares configs by predicted time,
//     t = launch_us + k_step_us x (full waves + last wave's fill ^ kTailExponent) x K steps
// (a K step: 64 columns, of a slice where K is split) plus, for a split, the summing pass and
// its partial sums' traffic, and for stream-K its fixup. Each config's division is the one its
// score picks. Fitted by weighted least squares on measured times of 200 random shapes of
// M = 1-16383; out of sample (fitted on half, checked on the other half, five ways) it chose
// 0.887x against the score's 0.816x at 64-511 rows and 0.899x against 0.882x at 512-4095, but
// 0.879x against 0.880x below 64 and 0.904x against 0.932x from 4096 (where the priors were fitted
// to the reference shapes): so it chooses in 64-4095 rows only.
constexpr double kTailExponent = 0.25;
constexpr ConfigTime kMidRowsTimes[] = {
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
    // The 2x2 clusters (each operand tile multicast to two CTAs), chosen by this model only;
    // fitted with the others' constants held on 120 random shapes of M 64-4095, their grids at
    // 30 clusters a wave (docs/PERF.md, "2x2 clusters on the wide tiles"): a K step 7-17% cheaper
    // than their 2-CTA twins'.
    {GemmConfig::pp_64x128_c2x2, 3.27, 0.2725},   {GemmConfig::pp_128x128_c2x2, 4.21, 0.3925},
    {GemmConfig::ppba_128x96_c2x2, 3.79, 0.3267}, {GemmConfig::pp_128x192_c2x2, 5.08, 0.5288},
    {GemmConfig::coop_128x256_c2x2, 4.87, 0.7327},
    // The narrow swapped tiles in clusters along A's rows, fitted with the others' constants held
    // on 80 random shapes of M 64-4095 (docs/PERF.md, "clusters along A's rows"): where N is a few
    // hundred columns their weight tiles, multicast to four tile columns, stream B for hundreds of
    // rows (463 x 264 x 3168: 0.59x cuBLASLt on the unclustered tile, 1.08x in a 1x4 cluster).
    {GemmConfig::ppba_64x16_c1x2, 2.87, 0.1323},  {GemmConfig::ppba_64x16_c1x4, 2.96, 0.1059},
    {GemmConfig::ppba_64x32_c1x4, 2.85, 0.1294},
    // The 64x64 tile in a 2x4 cluster (15 clusters a wave), fitted with the others' constants held
    // on 75 random shapes of M 64-511 (two seeds; docs/PERF.md, "64x64 tiles in 2x4 clusters"):
    // fitted on either set and judged on the other, the picks ran 0.923x -> 0.979x and 1.005x ->
    // 1.016x cuBLASLt. Timed only on the rows it was fitted on.
    {GemmConfig::pp_64x64_c2x4, 3.24, 0.1608, 0.0, 511},
};
// No streamed-bytes term; the summing pass or the chained fixups; x the partial sums' bytes
// (written, read) at 4 TB/s; the stream-K fixup.
constexpr SharedTimes kMidRowsShared{0.0, 4.90, 0.754, 12.5};

// ---- plain GEMMs of 4096 rows and more: the mid-rows form, a per-wave cost, its own constants ----
// From 4096 rows the grid-fill score (scores.cpp) alone chose, and lost most where N is narrow:
// on 24 random shapes of M 4096-16384, N 256-2048 (every config as the rule runs it alone,
// `tilelink-bench gemm --alone`, one H100; docs/PERF.md, "a time model from 4096 rows") its
// picks ran 0.924x cuBLASLt where the best config of each shape ran 0.998x: it preferred the
// 128x128 tile in a 2x1 cluster, whose K step over full waves costs more than at fewer rows, and
// never took a 2x2 cluster, the fastest on 10 of the 24. The mid-rows form fitted there did not
// carry to wide N: it over-rated the cooperative tiles on short K loops, whose epilogue (a wave's
// outputs stored while no warp group computes) the ping-pong tiles hide. So this model adds a
// per-wave cost: fitted, ~2 us a wave for the cooperative 128x256 tiles (a wave's outputs at
// HBM speed), ~0 for the ping-pong ones. It holds the nine configs that ran fastest, or within 3%
// of it, on some shape of its data; the others never did, and rank after these, by score.
// Fitted on 83 shapes (two sets of 24 of N 256-2048, 24 of N 2056-32768, the 11 reference
// shapes; one H100; docs/PERF.md, "a per-wave cost from 4096 rows"). Fitted on three of the sets
// and judged on the fourth, its picks ran 0.965x, 0.936x, 0.986x and 0.981x cuBLASLt where the
// score's ran 0.924x, 0.882x, 0.961x and 0.985x and the best config's 0.998x, 0.951x, 1.024x and
// 1.019x; the same form without the per-wave cost 0.963x, 0.929x, 0.965x and 0.985x.
constexpr ConfigTime kManyRowsTimes[] = {
    {GemmConfig::pp_128x192_c2x1, 5.18, 0.5960, -0.170},  {GemmConfig::pp_128x192_c2x2, 4.28, 0.5537, -0.0588},
    {GemmConfig::sk_128x256_c2x1, 3.63, 0.7692, 1.71},    {GemmConfig::coop_128x256_c2x1, 3.20, 0.7528, 2.16},
    {GemmConfig::coop_128x256_c2x2, 2.06, 0.7344, 1.90},  {GemmConfig::pp_128x128_c2x1, 4.55, 0.4852, -0.215},
    {GemmConfig::pp_128x128_c2x2, 3.78, 0.3839, 0.213},   {GemmConfig::pp_128x128_c1x2, 4.05, 0.4983, -0.105},
    {GemmConfig::cpba_128x192_c2x1, 4.80, 0.5975, 0.646},
};
// The mid-rows model's, held in the fit: few of its rows split K or ran stream-K, too few to refit them.
constexpr SharedTimes kManyRowsShared = kMidRowsShared;

// ---- plain GEMMs of fewer than 64 rows: predicted time of every division ----------------------
// Bound by streaming B (N x K) through narrow swapped tiles. The scores (scores.cpp) choose the
// config and the slice count apart, and on three sets of random shapes of M = 1-63 (60, 60 and 82
// shapes, every config at every slice count measured) their picks ran 0.948x, 0.910x and 0.929x
// cuBLASLt where the best measured division of each shape ran 1.007x, 0.964x and 0.979x
// (docs/PERF.md, "a time model for fewer than 64 rows"). So the plain GEMM predicts every
// division of the configs below, whole or in the slice counts split_k_reduce may run,
//     t = launch_us + k_step_us x (full waves + last wave's fill ^ kTailExponent) x K steps
//         + stream_weight x bytes streamed / HBM rate [+ pass + partial sums' traffic]
// (B is streamed once per cluster column where it does not fit in L2), and runs the fastest.
// Fitted by weighted least squares on two of the sets and checked on the third, its picks ran
// 0.982x, 0.936x and 0.936x; the constants below are fitted on all three. The 64x16 variants
// with a 128-column K tile or in a 4x1 cluster and the 128x32 tile are chosen here only; the
// clusters along A's rows by the mid-rows model too.
constexpr ConfigTime kFewRowsTimes[] = {
    {GemmConfig::ppba_64x16_c1x1, 2.95, 0.1378},     {GemmConfig::ppba_64x32_c1x1, 3.02, 0.1622},
    {GemmConfig::skba_128x64_c1x1, 2.62, 0.3291},    {GemmConfig::ppba_128x32_c1x1, 3.00, 0.2689},
    {GemmConfig::ppba_64x16x128_c1x1, 2.96, 0.1258}, {GemmConfig::ppba_64x16_c4x1, 2.99, 0.1327},
    // Clusters along A's rows (each weight tile multicast to 2-4 tile columns), fitted with the
    // others' constants held on 60 random shapes of M 1-63, every division of theirs measured
    // (docs/PERF.md, "clusters along A's rows"): out of sample the picks ran 1.006-1.007x cuBLASLt
    // where the library's constants before ran 0.995x.
    {GemmConfig::ppba_64x16_c1x2, 2.71, 0.1296},     {GemmConfig::ppba_64x16_c1x4, 2.93, 0.09804},
    {GemmConfig::ppba_64x32_c1x4, 2.77, 0.1329},
};
// x the operands' bytes streamed at 4 TB/s; the summing pass; x the partial sums' bytes (written,
// read) at 4 TB/s; no stream-K.
constexpr SharedTimes kFewRowsShared{0.330, 3.34, 2.30, 0.0};

template <size_t N>
const ConfigTime* find_time(const ConfigTime (&table)[N], GemmConfig cfg) {
  for (const ConfigTime& t : table)
    if (t.config == cfg) return &t;
  return nullptr;
}

// Full waves plus the last wave's fill ^ kTailExponent: `work` units on `slots` persistent CTAs.
double waves_with_tail(int64_t work, int64_t slots) {
  const int64_t full = work / slots, rest = work % slots;
  return double(full) + (rest > 0 ? std::pow(double(rest) / double(slots), kTailExponent) : 0.0);
}

int splits_of(const GemmPlan& plan) {
  return plan.decomposition == Decomposition::data_parallel || plan.decomposition == Decomposition::stream_k
             ? 1
             : plan.splits;
}

// The partial sums of `splits` slices, written and read back, at 4 TB/s.
double partial_us(const GemmShape& s, int splits) {
  return 2.0 * splits * double(s.M) * double(s.N) * 4.0 / kHbmBytesPerUs;
}

TimeTerms mid_rows_terms(const GemmShape& s, const GemmPlan& plan, int sms) {
  const GridCount g = grid_count(s, config_info(plan.config), sms);
  const double k_steps = double(s.K) / 64.0;
  TimeTerms t;
  if (plan.decomposition == Decomposition::stream_k) {
    t.waves = double(g.units) / double(g.slots);
    t.work = t.waves * std::ceil(k_steps);
    t.fixups = 1.0;
    return t;
  }
  const int splits = splits_of(plan);
  t.waves = waves_with_tail(g.units * splits, g.slots);
  t.work = t.waves * std::ceil(k_steps / splits);
  if (splits > 1) t.passes = 1.0, t.partial_us = partial_us(s, splits);
  return t;
}

// Narrow swapped tiles: K in whole K tiles of the config, and the operands' streamed bytes (B once
// per cluster column where it does not fit in L2; A once per cluster along B's rows).
TimeTerms few_rows_terms(const GemmShape& s, const GemmPlan& plan, int sms) {
  const GemmConfigInfo& c = config_info(plan.config);
  const GridCount g = grid_count(s, c, sms);
  const int splits = splits_of(plan);
  const int64_t slice_k = splits > 1 ? k_slices(s.K, splits).slice_k : s.K;
  const double k_steps = double((slice_k + c.tile_k - 1) / c.tile_k) * c.tile_k / 64.0;
  const int64_t b_reads = swapped_b_reads(s, c);
  const int64_t cluster_rows = g.units / b_reads;
  double b_bytes = double(s.N) * double(s.K) * 2.0;
  if (b_bytes > kL2Bytes) b_bytes *= double(b_reads);
  const double a_bytes = double(s.M) * double(s.K) * 2.0 * double(cluster_rows);
  TimeTerms t;
  t.waves = waves_with_tail(g.units * splits, g.slots);
  t.work = t.waves * k_steps;
  t.streamed_us = (a_bytes + b_bytes) / kHbmBytesPerUs;
  if (splits > 1) t.passes = 1.0, t.partial_us = partial_us(s, splits);
  return t;
}

const ConfigTime* find_time(TimeModel model, GemmConfig cfg) {
  switch (model) {
    case TimeModel::few_rows: return find_time(kFewRowsTimes, cfg);
    case TimeModel::mid_rows: return find_time(kMidRowsTimes, cfg);
    case TimeModel::many_rows: return find_time(kManyRowsTimes, cfg);
  }
  return nullptr;
}

// Whether a config's constants hold on an output of `rows` rows (ConfigTime::max_rows).
bool holds_on(const ConfigTime& t, int64_t rows) { return t.max_rows <= 0 || rows <= t.max_rows; }

// find_time, where the constants hold on an output of `rows` rows.
const ConfigTime* find_time(TimeModel model, GemmConfig cfg, int64_t rows) {
  const ConfigTime* t = find_time(model, cfg);
  return t && holds_on(*t, rows) ? t : nullptr;
}

bool timed_from_64_rows(GemmConfig cfg) {
  return find_time(kMidRowsTimes, cfg) != nullptr || find_time(kManyRowsTimes, cfg) != nullptr;
}

std::optional<ConfigTime> copy_of(const ConfigTime* t) { return t ? std::optional<ConfigTime>(*t) : std::nullopt; }

}  // namespace

std::optional<ConfigTime> config_time(TimeModel model, GemmConfig cfg) { return copy_of(find_time(model, cfg)); }

std::optional<ConfigTime> config_time(TimeModel model, GemmConfig cfg, int64_t rows) {
  return copy_of(find_time(model, cfg, rows));
}

SharedTimes shared_times(TimeModel model) {
  switch (model) {
    case TimeModel::few_rows: return kFewRowsShared;
    case TimeModel::mid_rows: return kMidRowsShared;
    case TimeModel::many_rows: return kManyRowsShared;
  }
  return kMidRowsShared;
}

TimeTerms time_terms(TimeModel model, const GemmShape& s, const GemmPlan& plan, int sms) {
  return model == TimeModel::few_rows ? few_rows_terms(s, plan, sms) : mid_rows_terms(s, plan, sms);
}

double plain_time_us(const GemmShape& s, const GemmPlan& plan, int sms) {
  const TimeModel model = plain_time_model(s.M) == TimeModel::many_rows ? TimeModel::many_rows : TimeModel::mid_rows;
  const ConfigTime* fit = find_time(model, plan.config, s.M);
  return fit ? predicted_us(mid_rows_terms(s, plan, sms), *fit, shared_times(model)) : -1.0;
}

bool few_rows_only(GemmConfig cfg) {
  return find_time(kFewRowsTimes, cfg) != nullptr && !timed_from_64_rows(cfg) && !has_fitted_prior(cfg);
}

bool timed_only(GemmConfig cfg) { return timed_from_64_rows(cfg) && !has_fitted_prior(cfg); }

std::vector<TimedPlan> few_rows_plans(const GemmShape& s, uint64_t allowed, int sms) {
  std::vector<TimedPlan> plans;
  for (const ConfigTime& fit : kFewRowsTimes) {
    const GemmConfigInfo& c = config_info(fit.config);
    if (!(allowed & config_bit(fit.config)) || c.cluster_m * c.cluster_n > sms || !holds_on(fit, s.M)) continue;
    const auto sliced = [&](int splits) {
      return splits > 1 ? GemmPlan{fit.config, Raster::along_n, 1, Decomposition::split_k_reduce, splits}
                        : GemmPlan{fit.config};
    };
    const auto time_us = [&](int splits) {
      return predicted_us(few_rows_terms(s, sliced(splits), sms), fit, kFewRowsShared);
    };
    TimedPlan best{sliced(1), time_us(1)};
    const ReduceSplits split = best_reduce_splits(s, c, sms, [&](int splits) { return 1.0 / time_us(splits); });
    const double split_us = split.splits >= 2 ? 1.0 / split.score : 0.0;
    if (split.splits >= 2 && split_us < best.us * (1.0 - 1e-9)) best = {sliced(split.splits), split_us};
    plans.push_back(best);
  }
  sort_fastest_first(plans);
  return plans;
}

}  // namespace tilelink::gemm::heuristic
