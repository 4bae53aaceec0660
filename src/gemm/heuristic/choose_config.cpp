// choose_config: the engine's config heuristic over a mask of configs (docs/GEMM.md, "Heuristic"),
// its ranking of every plan it may choose (what tuning times), and the plain GEMM's per-thread
// cache of its plans. Pure functions of the shape, the mask and the SM count, pinned by
// tests/cpu/gemm_heuristic_test.cpp (the picks) and gemm_plans_test.cpp (the ranking, the cache).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "plain_plan.hpp"
#include "grid.hpp"
#include "scores.hpp"
#include "time_models.hpp"
#include "tilelink/core/error.hpp"
#include "tilelink/gemm/tuning.hpp"

namespace tilelink::gemm {

using heuristic::best_division;
using heuristic::Candidate;
using heuristic::few_rows_only;
using heuristic::few_rows_plans;
using heuristic::KernelDims;
using heuristic::kernel_dims;
using heuristic::kTimedMinRows;
using heuristic::plain_time_us;
using heuristic::timed_only;

namespace {

// The SMs a budget stands for: itself, or (<= 0) the current device's — the cached count, not a
// driver query each time (the plain GEMM plans every call); without a usable device (a CPU-only
// caller planning ahead), an H100/H200's 132.
int budget_sms(int sm_budget) {
  if (sm_budget > 0) return sm_budget;
  int device = 0;
  return cudaGetDevice(&device) == cudaSuccess ? detail::device_sm_count(device) : 132;
}

// The plan's tile order for its use (the config and division stay).
GemmPlan with_order(const GemmShape& s, GemmPlan plan, PlanUse use) {
  const GemmConfigInfo& chosen = config_info(plan.config);
  if (use == PlanUse::plain) {
    // Walk the shorter tile dimension first: a wave then holds every tile that shares a slice of
    // the larger operand, which is read from memory once. Swizzle 1: wider groups lost up to
    // half the speed on some random shapes and won little on the others (docs/PERF.md).
    const KernelDims d = kernel_dims(s, chosen);
    const int64_t tiles_m = (d.m + chosen.tile_m - 1) / chosen.tile_m;
    const int64_t tiles_n = (d.n + chosen.tile_n - 1) / chosen.tile_n;
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

// The allowed configs at their score's division, in the order the rule prefers them: by
// predicted time where `timed` (configs without a fitted time at the shape's rows after those with
// one), else by score. The time models' own configs (no score prior) take part where their time
// is not predicted only `with_timed_only`.
std::vector<GemmPlan> by_model_or_score(const GemmShape& s, int sms, uint64_t allowed, bool timed,
                                        bool with_timed_only) {
  std::vector<heuristic::TimedPlan> by_time;
  std::vector<Candidate> by_score;
  for (int i = 0; i < kNumGemmConfigs; ++i) {
    const GemmConfig cfg = static_cast<GemmConfig>(i);
    const GemmConfigInfo& c = kGemmConfigInfo[i];
    if (!(allowed & config_bit(cfg))) continue;
    if (c.cluster_m * c.cluster_n > sms || few_rows_only(cfg)) continue;
    const Candidate cand = best_division(s, cfg, sms);
    // Timed: every config at its score's division, even one the score rules out (a wide swapped
    // tile over more columns of M than the score is fitted for: the time model was fitted on
    // them too, and they win where N is narrow and M in the thousands).
    const double us = timed ? plain_time_us(s, cand.plan, sms) : -1.0;
    if (us > 0.0) {
      by_time.push_back({cand.plan, us});
    } else if (!timed_only(cfg) || with_timed_only) {
      by_score.push_back(cand);
    }
  }
  heuristic::sort_fastest_first(by_time);
  std::stable_sort(by_score.begin(), by_score.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
  std::vector<GemmPlan> plans;
  for (const auto& t : by_time) plans.push_back(t.plan);
  for (const auto& c : by_score) plans.push_back(c.plan);
  return plans;
}

std::vector<GemmPlan> plans_of(const std::vector<heuristic::TimedPlan>& timed) {
  std::vector<GemmPlan> plans;
  for (const auto& t : timed) plans.push_back(t.plan);
  return plans;
}

}  // namespace

std::vector<GemmPlan> ranked_plans(const GemmShape& shape, int sm_budget, uint64_t allowed, PlanUse use) {
  const GemmShape s = packed(shape);
  const int sms = budget_sms(sm_budget);
  TL_REQUIRE(allowed != 0, "gemm: choose_config with an empty config mask");
  if (s.M <= 0 || s.N <= 0) return {GemmPlan{}};  // nothing to compute: any plan launches nothing
  std::vector<GemmPlan> plans;
  // Below 64 rows the plain GEMM takes the few-rows model's plans when one of its configs is allowed.
  if (use == PlanUse::plain && s.M < kTimedMinRows) plans = plans_of(few_rows_plans(s, allowed, sms));
  const bool timed = use == PlanUse::plain && heuristic::plain_time_model(s.M) != heuristic::TimeModel::few_rows;
  if (plans.empty()) plans = by_model_or_score(s, sms, allowed, timed, false);
  if (plans.empty()) plans = by_model_or_score(s, sms, allowed, timed, true);
  // The few-rows configs outside their band: only when nothing else is allowed (a one-config mask).
  if (plans.empty()) plans = plans_of(few_rows_plans(s, allowed, sms));
  TL_REQUIRE(!plans.empty(), "gemm: no allowed config fits an SM budget of ", sms);
  for (GemmPlan& p : plans) p = with_order(s, p, use);
  return plans;
}

namespace {

// The config of `rule_plan` at each division tuning times besides the rule's (its tile order):
// whole K; for `plain` configs 2-4 slices with a separate sum where each slice keeps
// kMinReduceSliceK columns and the partial sums and the pass's tail stay within the rule's
// bounds; on the stream-K scheduler 2 chained slices and stream-K.
std::vector<GemmPlan> other_divisions(const GemmShape& s, const GemmPlan& rule_plan) {
  const GemmConfigInfo& c = config_info(rule_plan.config);
  std::vector<GemmPlan> plans;
  const auto division = [&](Decomposition d, int splits) {
    GemmPlan p = rule_plan;
    p.decomposition = d;
    p.splits = splits;
    plans.push_back(p);
  };
  division(Decomposition::data_parallel, 1);
  if (c.set != GemmConfigSet::plain) return plans;
  for (int splits = 2; splits <= 4; ++splits) {
    if (s.K / splits < heuristic::kMinReduceSliceK) break;
    const double outputs = double(s.M) * double(s.N);
    if (double(splits) * outputs * 4.0 > heuristic::kMaxPartialBytes) break;
    if (double(k_slices(s.K, splits).tail) * outputs > heuristic::kMaxTailProducts) continue;
    division(Decomposition::split_k_reduce, splits);
  }
  if (c.schedule == GemmSchedule::sk && s.K / 2 >= heuristic::kMinReduceSliceK) {
    division(Decomposition::split_k, 2);
    division(Decomposition::stream_k, 1);
  }
  return plans;
}

}  // namespace

std::vector<GemmPlan> tuning_plans(const GemmShape& shape, int sm_budget, const GemmTuning& tuning) {
  TL_REQUIRE(tuning.candidates >= 1, "gemm tuning: candidates (", tuning.candidates, ") must be at least 1");
  const GemmShape s = packed(shape);
  std::vector<GemmPlan> plans = ranked_plans(s, sm_budget, kPlainConfigMask, PlanUse::plain);
  if (int(plans.size()) > tuning.candidates) plans.resize(size_t(tuning.candidates));
  // Below kTimedMinRows the few-rows model already chose each config's division by predicted
  // time over every slice count.
  if (!tuning.divisions || s.M < kTimedMinRows || s.N <= 0) return plans;
  const size_t firsts = plans.size();
  for (size_t i = 0; i < firsts; ++i)
    for (const GemmPlan& p : other_divisions(s, plans[i]))
      if (std::find(plans.begin(), plans.end(), p) == plans.end()) plans.push_back(p);
  return plans;
}

GemmPlan choose_config(const GemmShape& shape, DType /*dtype*/, int sm_budget, uint64_t allowed, PlanUse use) {
  return ranked_plans(shape, sm_budget, allowed, use).front();
}

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
}  // namespace tilelink::gemm
