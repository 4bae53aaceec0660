// tools/bench/shape_sample.cpp — see shape_sample.hpp.
#include "bench/shape_sample.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "tilelink/core/error.hpp"

namespace tilelink::bench {

namespace {
// exp(uniform(log lo, log hi)), rounded to a multiple of `step`, kept on the multiples inside
// [lo, hi] (the caller makes sure there is one).
int64_t log_uniform(std::mt19937_64& rng, double lo, double hi, int64_t step) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  const auto v = int64_t(std::llround(std::exp(u(rng)) / double(step))) * step;
  const int64_t first = (int64_t(lo) + step - 1) / step * step, last = int64_t(hi) / step * step;
  return std::clamp<int64_t>(v, first, last);
}
}  // namespace

SizeRange parse_size_range(const std::string& text, const char* what) {
  SizeRange r{0, 0};
  const size_t colon = text.find(':');
  char* end = nullptr;
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < text.size();
  if (ok) {
    r.min = std::strtoll(text.c_str(), &end, 10);
    ok = end == text.c_str() + colon;
  }
  if (ok) {
    r.max = std::strtoll(text.c_str() + colon + 1, &end, 10);
    ok = *end == '\0' && r.min >= 1 && r.min <= r.max;
  }
  TL_REQUIRE(ok, what, " '", text, "': expected LO:HI with 1 <= LO <= HI (e.g. 64:4095)");
  return r;
}

std::vector<DrawnShape> random_gemm_shapes(int count, uint64_t seed, SizeRange rows, SizeRange cols) {
  TL_REQUIRE((cols.min + 7) / 8 * 8 <= cols.max, "random_gemm_shapes: columns ", cols.min, ":", cols.max,
             " hold no multiple of 8");
  std::mt19937_64 rng(seed);
  std::vector<DrawnShape> shapes;
  for (int i = 0; i < count; ++i) {
    const int64_t m = log_uniform(rng, double(rows.min), double(rows.max), 1);
    const int64_t n = log_uniform(rng, double(cols.min), double(cols.max), 8);
    const int64_t k = log_uniform(rng, 256, 32768, 8);
    shapes.push_back({m, n, k});
  }
  return shapes;
}

RatioSummary summarize_ratios(std::vector<double> ratios) {
  RatioSummary s;
  s.count = int(ratios.size());
  if (ratios.empty()) return s;
  std::sort(ratios.begin(), ratios.end());
  double log_sum = 0;
  for (double r : ratios) log_sum += std::log(r);
  s.geomean = std::exp(log_sum / double(ratios.size()));
  s.min = ratios.front();
  // Nearest-rank percentiles: the smallest ratio with at least p of the ratios at or below it.
  auto rank = [&](double p) { return ratios[size_t(std::max(1.0, std::ceil(p * double(ratios.size())))) - 1]; };
  s.p10 = rank(0.10);
  s.median = rank(0.50);
  s.below_090 = int(std::count_if(ratios.begin(), ratios.end(), [](double r) { return r < 0.90; }));
  return s;
}

}  // namespace tilelink::bench
