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

// An inclusive range one dimension is drawn from.
struct SizeRange {
  int64_t min, max;
};
// The defaults are the whole ranges the sweeps check the engine on.
inline constexpr SizeRange kDefaultRows{1, 16384};
inline constexpr SizeRange kDefaultCols{256, 32768};
// "LO:HI" (1 <= LO <= HI); throws tilelink::Error naming `what` (the flag) and the text otherwise.
SizeRange parse_size_range(const std::string& text, const char* what);

// `count` shapes from `seed`: M log-uniform in `rows`; N log-uniform in `cols` and K in
// [256, 32768], both rounded to multiples of 8 (16-byte rows) inside their range. The same seed
// and ranges give the same shapes; a column range must hold a multiple of 8.
std::vector<DrawnShape> random_gemm_shapes(int count, uint64_t seed, SizeRange rows = kDefaultRows,
                                           SizeRange cols = kDefaultCols);

// Distribution of speed ratios (reference time / candidate time; > 1: the candidate is faster).
struct RatioSummary {
  int count = 0;
  double geomean = 0, min = 0, p10 = 0, median = 0;
  int below_090 = 0;  // how many ratios are < 0.90
};
RatioSummary summarize_ratios(std::vector<double> ratios);

}  // namespace tilelink::bench
