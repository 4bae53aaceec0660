// The random GEMM shapes of `tilelink-bench gemm --sweep-random` and the summary it prints.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bench/shape_sample.hpp"
#include "tilelink/core/error.hpp"

namespace tilelink::bench {
namespace {

TEST(RandomGemmShapes, StayInRangeAlignedAndSpreadOverDecades) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto shapes = random_gemm_shapes(20000, seed);
  ASSERT_EQ(shapes.size(), 20000u);
  int small_m = 0, small_n = 0;
  for (const auto& s : shapes) {
    ASSERT_GE(s.m, 1);
    ASSERT_LE(s.m, 16384);
    for (int64_t d : {s.n, s.k}) {
      ASSERT_GE(d, 256);
      ASSERT_LE(d, 32768);
      ASSERT_EQ(d % 8, 0);
    }
    small_m += s.m <= 128;
    small_n += s.n <= 2048;
  }
  // Log-uniform: M <= 128 is half of [1, 16384] in log scale; N <= 2048 is three sevenths of
  // [256, 32768]. 20000 draws put both within a few standard deviations (~0.004).
  EXPECT_NEAR(small_m / 20000.0, std::log(128.0) / std::log(16384.0), 0.03);
  EXPECT_NEAR(small_n / 20000.0, std::log(8.0) / std::log(128.0), 0.03);
}

TEST(RandomGemmShapes, RangesBoundMAndNAndKeepTheDefaultSequence) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const SizeRange mid = parse_size_range("64:4095", "--rows");
  EXPECT_EQ(mid.min, 64);
  EXPECT_EQ(mid.max, 4095);
  int low_half = 0;
  for (const auto& s : random_gemm_shapes(5000, seed, mid)) {
    ASSERT_GE(s.m, 64);
    ASSERT_LE(s.m, 4095);
    low_half += s.m <= 512;  // half of [64, 4095] in log scale is below ~512
  }
  EXPECT_NEAR(low_half / 5000.0, std::log(512.0 / 64.0) / std::log(4095.0 / 64.0), 0.05);
  for (const auto& s : random_gemm_shapes(20, seed, parse_size_range("300:300", "--rows"))) EXPECT_EQ(s.m, 300);
  // The default range is the one the sweeps always drew from: the same seed, the same shapes.
  const auto a = random_gemm_shapes(50, seed), b = random_gemm_shapes(50, seed, parse_size_range("1:16384", "--rows"),
                                                                   parse_size_range("256:32768", "--cols"));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].m == b[i].m && a[i].n == b[i].n && a[i].k == b[i].k);
  for (const char* bad : {"", "64", "64:", ":4095", "0:10", "10:5", "a:b", "64:4095x", "64-4095"})
    EXPECT_THROW(parse_size_range(bad, "--rows"), tilelink::Error) << bad;
  // Columns: multiples of 8 inside the range, N alone changes (M and K draw as before).
  const auto narrow = random_gemm_shapes(2000, seed, kDefaultRows, parse_size_range("250:770", "--cols"));
  const auto wide = random_gemm_shapes(2000, seed);
  for (size_t i = 0; i < narrow.size(); ++i) {
    ASSERT_GE(narrow[i].n, 256);
    ASSERT_LE(narrow[i].n, 768);
    ASSERT_EQ(narrow[i].n % 8, 0);
    ASSERT_TRUE(narrow[i].m == wide[i].m && narrow[i].k == wide[i].k);
  }
  for (const auto& s : random_gemm_shapes(10, seed, kDefaultRows, parse_size_range("1000:1007", "--cols")))
    EXPECT_EQ(s.n, 1000);
  EXPECT_THROW(random_gemm_shapes(1, seed, kDefaultRows, parse_size_range("1001:1007", "--cols")), tilelink::Error);
}

TEST(RandomGemmShapes, SameSeedSameShapesOtherSeedOthers) {
  const auto a = random_gemm_shapes(50, 7), b = random_gemm_shapes(50, 7), c = random_gemm_shapes(50, 8);
  int same_as_other_seed = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].m, b[i].m);
    EXPECT_EQ(a[i].n, b[i].n);
    EXPECT_EQ(a[i].k, b[i].k);
    same_as_other_seed += a[i].m == c[i].m && a[i].n == c[i].n && a[i].k == c[i].k;
  }
  EXPECT_LT(same_as_other_seed, 3);
}

TEST(RatioSummary, GeomeanPercentilesAndCountBelowThreshold) {
  const RatioSummary s = summarize_ratios({1.0, 0.5, 2.0, 0.89, 1.1, 1.0, 1.0, 1.0, 1.0, 1.0});
  EXPECT_EQ(s.count, 10);
  EXPECT_NEAR(s.geomean, std::exp((std::log(0.5) + std::log(2.0) + std::log(0.89) + std::log(1.1)) / 10.0), 1e-12);
  EXPECT_DOUBLE_EQ(s.min, 0.5);
  EXPECT_DOUBLE_EQ(s.p10, 0.5);     // 1st of 10 sorted
  EXPECT_DOUBLE_EQ(s.median, 1.0);  // 5th of 10 sorted: 0.5 0.89 1 1 [1] ...
  EXPECT_EQ(s.below_090, 2);
  EXPECT_EQ(summarize_ratios({}).count, 0);
}

}  // namespace
}  // namespace tilelink::bench
