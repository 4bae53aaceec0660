// The plain GEMM's predicted times (private to the engine). Fitted to measured times of random
// shapes on the H200; the fits and their out-of-sample checks are in the .cpp beside each table.
#pragma once

#include <cstdint>
#include <optional>

#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm::heuristic {

// The rows where the plain GEMM compares configs by plain_time_us.
constexpr int64_t kTimedMinRows = 64;
constexpr int64_t kTimedMaxRows = 4095;

// Predicted microseconds of `plan` on the shape; < 0 for a config without a fitted time.
double plain_time_us(const GemmShape& s, const GemmPlan& plan, int sms);

// Below kTimedMinRows: the fastest predicted division (whole, or the slice counts split_k_reduce
// may run) among the allowed few-rows configs; nullopt if none is allowed.
std::optional<GemmPlan> few_rows_plan(const GemmShape& s, uint64_t allowed, int sms);

// Configs the few-rows model alone chooses: its own, less those the score has a fitted prior for.
bool few_rows_only(GemmConfig cfg);

}  // namespace tilelink::gemm::heuristic
