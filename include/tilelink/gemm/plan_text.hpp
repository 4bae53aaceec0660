// tilelink/gemm/plan_text.hpp — a GemmPlan as one line of text, and back.
//
//   config/raster/swN[/splitS | /reduceS | /streamk]
//   pp_128x128_c2x2/along_n/sw1            data-parallel
//   sk_128x128_c1x1/along_m/sw1/split3     split-K, 3 slices chained in the kernel
//   ppba_64x16_c1x1/along_n/sw1/reduce8    split_k_reduce, 8 slices and a summing pass
//   sk_128x256_c2x1/along_n/sw1/streamk    stream-K
//
// What the benchmarks print, the time-model tools read and tuned-plan files hold.
#pragma once

#include <string>

#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm {

std::string plan_text(const GemmPlan& plan);

// Parses plan_text's form. A text naming no config of this build, or with a malformed field,
// leaves *out alone and returns false with the reason in *why (if given).
bool parse_plan(const std::string& text, GemmPlan* out, std::string* why = nullptr);

}  // namespace tilelink::gemm
