// tools/bench/shape_sample.hpp — GEMM shapes drawn at random, and the summary of a ratio sweep:
// a rule tuned on a handful of shapes is checked on shapes nobody chose.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tilelink::bench {

struct DrawnShape {
  int64_t m, n, k;
};

// The rows M is drawn from; the default is the whole range the sweeps check the engine on.
struct RowRange {
  int64_t min = 1, max = 16384;
};
// "LO:HI" (1 <= LO <= HI); throws tilelink::Error naming the text otherwise.
RowRange parse_row_range(const std::string& text);

// `count` shapes from `seed`: M log-uniform in `rows`; N and K log-uniform in [256, 32768],
// rounded to multiples of 8 (16-byte rows). The same seed and rows give the same shapes.
std::vector<DrawnShape> random_gemm_shapes(int count, uint64_t seed, RowRange rows = {});

// Distribution of speed ratios (reference time / candidate time; > 1: the candidate is faster).
struct RatioSummary {
  int count = 0;
  double geomean = 0, min = 0, p10 = 0, median = 0;
  int below_090 = 0;  // how many ratios are < 0.90
};
RatioSummary summarize_ratios(std::vector<double> ratios);

}  // namespace tilelink::bench
