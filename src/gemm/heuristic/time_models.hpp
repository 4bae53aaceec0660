// The plain GEMM's predicted times (private to the engine and its tools). Two models of one form:
//     t = launch_us + k_step_us x work                      (per config)
//         + stream_weight x streamed_us + pass_us x passes
//         + partial_weight x partial_us + fixup_us x fixups  (per model)
// `work` is K steps of 64 columns times the waves the grid runs (full waves plus the last wave's
// fill ^ 0.25); `streamed_us` the operands' bytes at 4 TB/s (few rows only); `passes` 1 where K
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
  mid_rows,  // kTimedMinRows-kTimedMaxRows rows: every plain config at the division its score picks
  few_rows,  // fewer than kTimedMinRows: every division of the narrow swapped tiles
};

// The rows where the plain GEMM compares configs by the mid_rows model.
constexpr int64_t kTimedMinRows = 64;
constexpr int64_t kTimedMaxRows = 4095;

struct TimeTerms {
  double work = 0, streamed_us = 0, passes = 0, partial_us = 0, fixups = 0;
};
struct ConfigTime {
  GemmConfig config;
  double launch_us, k_step_us;  // k_step_us: one K step of a whole wave
};
struct SharedTimes {
  double stream_weight, pass_us, partial_weight, fixup_us;
};

// The model's constants: the config's (nullopt where the model has none) and the shared ones.
std::optional<ConfigTime> config_time(TimeModel model, GemmConfig cfg);
SharedTimes shared_times(TimeModel model);

// The terms of `plan` on the shape under `model` (any config: its tile and cluster set them).
TimeTerms time_terms(TimeModel model, const GemmShape& s, const GemmPlan& plan, int sms);

inline double predicted_us(const TimeTerms& t, const ConfigTime& c, const SharedTimes& sh) {
  return c.launch_us + c.k_step_us * t.work + sh.stream_weight * t.streamed_us + sh.pass_us * t.passes +
         sh.partial_weight * t.partial_us + sh.fixup_us * t.fixups;
}

// Predicted microseconds of `plan` under the mid_rows model; < 0 for a config without a fitted time.
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

// Configs the few-rows model alone chooses: its own, less those the score has a fitted prior for.
bool few_rows_only(GemmConfig cfg);
// Configs the mid-rows model alone chooses (kTimedMinRows-kTimedMaxRows rows): its own, less
// those the score has a fitted prior for and the few-rows model's.
bool mid_rows_only(GemmConfig cfg);

}  // namespace tilelink::gemm::heuristic
