// tools/bench/shape_sample.cpp — see shape_sample.hpp.
#include "bench/shape_sample.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

#include "tilelink/core/error.hpp"

namespace tilelink::bench {

namespace {
// exp(uniform(log lo, log hi)), rounded to a multiple of `step`, kept inside [lo, hi].
int64_t log_uniform(std::mt19937_64& rng, double lo, double hi, int64_t step) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  const auto v = int64_t(std::llround(std::exp(u(rng)) / double(step))) * step;
  return std::clamp<int64_t>(v, int64_t(lo), int64_t(hi));
}
}  // namespace

RowRange parse_row_range(const std::string& text) {
  RowRange r;
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
  TL_REQUIRE(ok, "rows '", text, "': expected LO:HI with 1 <= LO <= HI (e.g. 64:4095)");
  return r;
}

std::vector<DrawnShape> random_gemm_shapes(int count, uint64_t seed, RowRange rows) {
  std::mt19937_64 rng(seed);
  std::vector<DrawnShape> shapes;
  for (int i = 0; i < count; ++i) {
    const int64_t m = log_uniform(rng, double(rows.min), double(rows.max), 1);
    const int64_t n = log_uniform(rng, 256, 32768, 8);
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
