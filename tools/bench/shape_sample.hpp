// tools/bench/shape_sample.hpp — GEMM shapes drawn at random, and the summary of a ratio sweep:
// a rule tuned on a handful of shapes is checked on shapes nobody chose.
#pragma once

#include <cstdint>
#include <vector>

namespace tilelink::bench {

struct DrawnShape {
  int64_t m, n, k;
};

// `count` shapes from `seed`: M log-uniform in [1, 16384]; N and K log-uniform in [256, 32768],
// rounded to multiples of 8 (16-byte rows). The same seed gives the same shapes.
std::vector<DrawnShape> random_gemm_shapes(int count, uint64_t seed);

// Distribution of speed ratios (reference time / candidate time; > 1: the candidate is faster).
struct RatioSummary {
  int count = 0;
  double geomean = 0, min = 0, p10 = 0, median = 0;
  int below_090 = 0;  // how many ratios are < 0.90
};
RatioSummary summarize_ratios(std::vector<double> ratios);

}  // namespace tilelink::bench
