// The plain GEMM's plan per call (private to the engine; the CPU tests include it).
#pragma once

#include "tilelink/core/dtype.hpp"
#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm::detail {

// choose_config(shape, dtype, SMs, kPlainConfigMask, PlanUse::plain) for the SMs `sm_budget`
// stands for (<= 0: the current device's). `gemm()` plans every call, and a GEMM of few rows
// compares a few hundred predicted times (~2-4 us of host time, as long as the GEMM itself), so
// each thread keeps the plans of its last few shapes; a plan depends on nothing else.
GemmPlan plain_plan(const GemmShape& shape, DType dtype, int sm_budget);

}  // namespace tilelink::gemm::detail
