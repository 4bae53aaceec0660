// The plain GEMM's predicted times (private to the engine and its tools). Three models of one form:
//     t = launch_us + k_step_us x work + wave_us x waves     (per config)
//         + stream_weight x streamed_us + pass_us x passes
//         + partial_weight x partial_us + fixup_us x fixups  (per model)
// `waves` is the waves the grid runs (full waves plus the last wave's fill ^ 0.25; stream-K: its
// units over its CTAs), `work` K steps of 64 columns times `waves`; `wave_us` a wave's cost
// outside the K loop that the kernel does not hide (the many-rows model's only: the cooperative
// tiles store their outputs while no warp group computes; zero in the other models);
// `streamed_us` the operands' bytes at 4 TB/s (few rows only); `passes` 1 where K
// is split (the summing pass, or the chained fixups); `partial_us` the partial sums' bytes
// (written, read) at 4 TB/s; `fixups` 1 for stream-K. The constants are fitted to measured times
// of random shapes (scripts/fit_gemm_times.py over `tilelink-bench gemm --alone/--divisions`,
// through `tilelink-gemm-model`); the fits and their out-of-sample checks are in the .cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm::heuristic {

enum class TimeModel : uint8_t {
  few_rows,   // fewer than kTimedMinRows: every division of the narrow swapped tiles
  mid_rows,   // kTimedMinRows to kManyRowsMin - 1: every plain config at the division its score picks
  many_rows,  // kManyRowsMin and more: as mid_rows, with its own constants and a per-wave cost
};

// The plain GEMM compares configs by predicted time (the grid-fill score ranks only the configs
// the model has no constants for, after those it has); from kManyRowsMin rows, where grids run
// several full waves and a tile's speed differs from its speed in one short wave, with the
// many_rows constants.
constexpr int64_t kTimedMinRows = 64;
constexpr int64_t kManyRowsMin = 4096;

// The model the plain GEMM chooses by on an output of `rows` rows.
constexpr TimeModel plain_time_model(int64_t rows) {
  if (rows < kTimedMinRows) return TimeModel::few_rows;
  return rows < kManyRowsMin ? TimeModel::mid_rows : TimeModel::many_rows;
}

struct TimeTerms {
  double work = 0, waves = 0, streamed_us = 0, passes = 0, partial_us = 0, fixups = 0;
};
struct ConfigTime {
  GemmConfig config;
  double launch_us, k_step_us;  // k_step_us: one K step of a whole wave
  double wave_us = 0.0;         // one wave's cost outside the K loop
  int64_t max_rows = 0;         // > 0: fitted on outputs of at most this many rows; not timed above
};
struct SharedTimes {
  double stream_weight, pass_us, partial_weight, fixup_us;
};

// The model's constants: the config's (nullopt where the model has none) and the shared ones.
std::optional<ConfigTime> config_time(TimeModel model, GemmConfig cfg);
// The config's constants where they hold on an output of `rows` rows: nullopt also beyond the
// rows they were fitted on (ConfigTime::max_rows). What the rule and the fitting tool time by.
std::optional<ConfigTime> config_time(TimeModel model, GemmConfig cfg, int64_t rows);
SharedTimes shared_times(TimeModel model);

// The terms of `plan` on the shape under `model` (any config: its tile and cluster set them).
TimeTerms time_terms(TimeModel model, const GemmShape& s, const GemmPlan& plan, int sms);

inline double predicted_us(const TimeTerms& t, const ConfigTime& c, const SharedTimes& sh) {
  return c.launch_us + c.k_step_us * t.work + c.wave_us * t.waves + sh.stream_weight * t.streamed_us +
         sh.pass_us * t.passes + sh.partial_weight * t.partial_us + sh.fixup_us * t.fixups;
}

// Predicted microseconds of `plan` at its score's division: with the many_rows constants from
// kManyRowsMin rows, else the mid_rows ones; < 0 for a config without constants there (or
// beyond the rows they were fitted on).
double plain_time_us(const GemmShape& s, const GemmPlan& plan, int sms);

// A plan with its predicted time.
struct TimedPlan {
  GemmPlan plan;
  double us;
};

// Fastest predicted first; plans predicted alike keep their order (the config list's).
inline void sort_fastest_first(std::vector<TimedPlan>& plans) {
  std::stable_sort(plans.begin(), plans.end(), [](const TimedPlan& a, const TimedPlan& b) { return a.us < b.us; });
}

// Below kTimedMinRows: each allowed few-rows config at its fastest predicted division (whole, or
// the slice counts split_k_reduce may run), fastest first; empty if none is allowed.
std::vector<TimedPlan> few_rows_plans(const GemmShape& s, uint64_t allowed, int sms);

// Configs the few-rows model alone chooses: its own, less those the score has a fitted prior for
// and those the mid- or many-rows model times too.
bool few_rows_only(GemmConfig cfg);
// Configs only a time model chooses from kTimedMinRows rows up (where it has their constants):
// the mid- and many-rows models' own, less those the score has a fitted prior for.
bool timed_only(GemmConfig cfg);

}  // namespace tilelink::gemm::heuristic
