// GEMM plans beyond the single pick: the per-thread plan cache agrees with the rule, the rule's
// ranking (what tuning times), the tuning switch, plan equality, plans as text and as lines of a
// tuned-plans file. Pure host logic: runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tilelink/core/error.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/gemm/plan_text.hpp"
#include "tilelink/gemm/tuning.hpp"
#include "gemm/heuristic/plain_plan.hpp"
#include "gemm/heuristic/time_models.hpp"

namespace g = tilelink::gemm;
using tilelink::DType;

namespace {

// gemm() plans through a per-thread cache of recent shapes: whatever was planned before, and in
// whichever order, the plan is choose_config's for that shape and SM count.
TEST(GemmHeuristic, CachedPlainPlansAreTheRulesPlans) {
  std::vector<g::GemmShape> shapes;
  for (int64_t m : {1, 5, 40, 63, 64, 300, 5000})
    for (int64_t n : {256, 4096, 28672})
      for (int64_t k : {512, 6216, 16384}) shapes.push_back(g::packed({m, n, k}));
  shapes.push_back({7, 4096, 4096, 4104, 4096, 4096});  // strided A: another key than the packed shape
  for (int pass = 0; pass < 3; ++pass)
    for (size_t i = 0; i < shapes.size(); ++i) {
      const g::GemmShape& s = shapes[pass == 1 ? shapes.size() - 1 - i : i];
      for (int sms : {132, 78}) {
        const g::GemmPlan want = g::choose_config(s, DType::bf16, sms, g::kPlainConfigMask, g::PlanUse::plain);
        const g::GemmPlan got = g::detail::plain_plan(s, DType::bf16, sms);
        ASSERT_EQ(got.config, want.config) << s.M << "x" << s.N << "x" << s.K << " sms " << sms;
        ASSERT_EQ(got.decomposition, want.decomposition);
        ASSERT_EQ(got.splits, want.splits);
        ASSERT_EQ(got.raster, want.raster);
        ASSERT_EQ(got.swizzle, want.swizzle);
      }
    }
}

// What tuning times: the rule's ranking. Its first plan is choose_config's, every allowed config
// that fits the budget appears once at its own division and tile order, and from 64 rows (plain
// use) the predicted times never fall along the list.
TEST(GemmHeuristic, RankedPlansStartWithTheRulesPickAndHoldEachConfigOnce) {
  for (int64_t m : {1, 17, 63, 64, 300, 2500, 4095, 4096, 9000})
    for (int64_t n : {256, 4096, 28672})
      for (int64_t k : {512, 6216, 16384})
        for (int sms : {132, 78})
          for (g::PlanUse use : {g::PlanUse::plain, g::PlanUse::fused_op})
            for (uint64_t mask : {g::kLibConfigMask, g::kPlainConfigMask}) {
              const g::GemmShape s = g::packed({m, n, k});
              const std::vector<g::GemmPlan> ranked = g::ranked_plans(s, sms, mask, use);
              const g::GemmPlan pick = g::choose_config(s, DType::bf16, sms, mask, use);
              ASSERT_FALSE(ranked.empty());
              const std::string where = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                                        " sms " + std::to_string(sms);
              EXPECT_EQ(ranked[0].config, pick.config) << where;
              EXPECT_EQ(ranked[0].decomposition, pick.decomposition) << where;
              EXPECT_EQ(ranked[0].splits, pick.splits) << where;
              EXPECT_EQ(ranked[0].raster, pick.raster) << where;
              EXPECT_EQ(ranked[0].swizzle, pick.swizzle) << where;
              uint64_t seen = 0;
              for (const g::GemmPlan& p : ranked) {
                EXPECT_TRUE(mask & g::config_bit(p.config)) << where;
                EXPECT_FALSE(seen & g::config_bit(p.config)) << where << ": " << g::config_name(p.config) << " twice";
                seen |= g::config_bit(p.config);
                // Each plan is the one the rule would run were its config the only one allowed.
                const g::GemmPlan alone = g::choose_config(s, DType::bf16, sms, g::config_bit(p.config), use);
                EXPECT_EQ(p.decomposition, alone.decomposition) << where << " " << g::config_name(p.config);
                EXPECT_EQ(p.splits, alone.splits) << where << " " << g::config_name(p.config);
                EXPECT_EQ(p.raster, alone.raster) << where << " " << g::config_name(p.config);
              }
              const bool timed =
                  use == g::PlanUse::plain && g::heuristic::plain_time_model(m) != g::heuristic::TimeModel::few_rows;
              if (timed && mask == g::kPlainConfigMask) {
                EXPECT_GE(ranked.size(), 10u) << where;
                for (size_t i = 1; i < ranked.size(); ++i) {
                  const double a = g::heuristic::plain_time_us(s, ranked[i - 1], sms);
                  const double b = g::heuristic::plain_time_us(s, ranked[i], sms);
                  if (a > 0 && b > 0) EXPECT_LE(a, b) << where << " at " << i;
                }
              }
            }
  EXPECT_THROW(g::ranked_plans(g::packed({64, 256, 256}), 132, 0), tilelink::Error);
}

// Tuning's switch: the environment's text read strictly, the explicit setting over it, and the
// table of tuned plans empty until a GPU tunes something.
TEST(GemmTuning, TheSwitchAndItsEnvironmentVariable) {
  EXPECT_FALSE(g::detail::tuning_requested(nullptr));
  EXPECT_FALSE(g::detail::tuning_requested(""));
  EXPECT_FALSE(g::detail::tuning_requested("0"));
  EXPECT_TRUE(g::detail::tuning_requested("1"));
  EXPECT_TRUE(g::detail::tuning_requested(" 1 "));
  for (const char* bad : {"2", "yes", "-1", "1x", "on"}) {
    EXPECT_THROW(g::detail::tuning_requested(bad), tilelink::Error) << bad;
    try {
      g::detail::tuning_requested(bad);
    } catch (const tilelink::Error& e) {
      EXPECT_NE(std::string(e.what()).find("TILELINK_GEMM_TUNE"), std::string::npos) << e.what();
    }
  }
  const bool before = g::plain_gemm_tuning();
  g::set_plain_gemm_tuning(true);
  EXPECT_TRUE(g::plain_gemm_tuning());
  g::set_plain_gemm_tuning(false);
  EXPECT_FALSE(g::plain_gemm_tuning());
  g::set_plain_gemm_tuning(before);
  g::clear_tuned_plans();
  EXPECT_EQ(g::tuned_plan_count(), 0u);
}

// Plans are equal when they run the same kernel the same way: every field counts.
TEST(GemmPlan, EqualWhereConfigOrderAndDivisionAgree) {
  const g::GemmPlan p{g::GemmConfig::sk_128x256_c2x1, g::Raster::along_m, 1, g::Decomposition::split_k, 2};
  g::GemmPlan q = p;
  EXPECT_TRUE(p == q);
  q.splits = 3;
  EXPECT_FALSE(p == q);
  q = p, q.raster = g::Raster::along_n;
  EXPECT_FALSE(p == q);
  q = p, q.swizzle = 2;
  EXPECT_FALSE(p == q);
  q = p, q.decomposition = g::Decomposition::stream_k;
  EXPECT_FALSE(p == q);
  q = p, q.config = g::GemmConfig::sk_128x128_c1x1;
  EXPECT_FALSE(p == q);
}

// Plans as text: every config with every division prints and parses back to itself; malformed
// text is refused with a reason.
TEST(GemmPlanText, RoundTripsEveryConfigAndDivision) {
  for (int i = 0; i < g::kNumGemmConfigs; ++i)
    for (g::Decomposition d : {g::Decomposition::data_parallel, g::Decomposition::split_k,
                               g::Decomposition::stream_k, g::Decomposition::split_k_reduce})
      for (g::Raster r : {g::Raster::along_m, g::Raster::along_n})
        for (int swizzle : {1, 8}) {
          g::GemmPlan p;
          p.config = static_cast<g::GemmConfig>(i);
          p.decomposition = d;
          p.splits = d == g::Decomposition::split_k || d == g::Decomposition::split_k_reduce ? 2 + i % 31 : 1;
          p.raster = r;
          p.swizzle = swizzle;
          const std::string text = g::plan_text(p);
          g::GemmPlan back;
          std::string why;
          ASSERT_TRUE(g::parse_plan(text, &back, &why)) << text << ": " << why;
          EXPECT_EQ(back.config, p.config) << text;
          EXPECT_EQ(back.decomposition, p.decomposition) << text;
          EXPECT_EQ(back.splits, p.splits) << text;
          EXPECT_EQ(back.raster, p.raster) << text;
          EXPECT_EQ(back.swizzle, p.swizzle) << text;
        }
  EXPECT_EQ(g::plan_text({g::GemmConfig::pp_128x128_c2x2, g::Raster::along_n, 1,
                          g::Decomposition::data_parallel, 1}),
            "pp_128x128_c2x2/along_n/sw1");
  for (const char* bad : {"", "pp_128x128_c2x2", "pp_128x128_c2x2/along_n", "nosuch/along_n/sw1",
                          "pp_128x128_c2x2/sideways/sw1", "pp_128x128_c2x2/along_n/sw3",
                          "pp_128x128_c2x2/along_n/sw0", "pp_128x128_c2x2/along_n/swx",
                          "sk_128x128_c1x1/along_n/sw1/split1", "sk_128x128_c1x1/along_n/sw1/split33",
                          "sk_128x128_c1x1/along_n/sw1/reduce", "sk_128x128_c1x1/along_n/sw1/reduce4x",
                          "sk_128x128_c1x1/along_n/sw1/streamk/x", "sk_128x128_c1x1/along_n/sw1/chunked"}) {
    g::GemmPlan out{g::GemmConfig::coop_128x256_c1x1, g::Raster::along_m, 4, g::Decomposition::stream_k, 1};
    std::string why;
    EXPECT_FALSE(g::parse_plan(bad, &out, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
    EXPECT_EQ(out.config, g::GemmConfig::coop_128x256_c1x1) << bad << ": *out left alone";
    EXPECT_EQ(out.swizzle, 4) << bad;
  }
}

// A tuned-plans file's line: printed and parsed back; a config this build lacks is a line of
// another build (parsed, not known), anything else malformed is refused with a reason.
TEST(GemmTuning, TunedPlansFileLines) {
  g::detail::TunedLine l;
  l.gpu = "NVIDIA H200:132";
  l.dtype = DType::fp16;
  l.shape = {1000, 1376, 2048, 2056, 2048, 1384};
  l.sms = 66;
  l.plan = {g::GemmConfig::sk_128x128_c1x1, g::Raster::along_m, 1, g::Decomposition::split_k_reduce, 3};
  l.us = 41.2849;
  const std::string text = g::detail::tuned_line_text(l);
  EXPECT_EQ(text, "NVIDIA H200:132,fp16,1000,1376,2048,2056,2048,1384,66,sk_128x128_c1x1/along_m/sw1/reduce3,41.28");
  g::detail::TunedLine back;
  bool known = false;
  std::string why;
  ASSERT_TRUE(g::detail::parse_tuned_line(text, &back, &known, &why)) << why;
  EXPECT_TRUE(known);
  EXPECT_EQ(back.gpu, l.gpu);
  EXPECT_EQ(back.dtype, l.dtype);
  EXPECT_EQ(back.shape.M, 1000);
  EXPECT_EQ(back.shape.N, 1376);
  EXPECT_EQ(back.shape.K, 2048);
  EXPECT_EQ(back.shape.lda, 2056);
  EXPECT_EQ(back.shape.ldb, 2048);
  EXPECT_EQ(back.shape.ldd, 1384);
  EXPECT_EQ(back.sms, 66);
  EXPECT_EQ(back.plan.config, l.plan.config);
  EXPECT_EQ(back.plan.decomposition, l.plan.decomposition);
  EXPECT_EQ(back.plan.splits, 3);
  EXPECT_NEAR(back.us, 41.28, 1e-9);

  ASSERT_TRUE(
      g::detail::parse_tuned_line("X:1,bf16,8,8,8,8,8,8,1,coop_999x999_c1x1/along_n/sw1,1", &back, &known, &why));
  EXPECT_FALSE(known) << "another build's config";
  const std::string ok = "X:1,bf16,64,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1,1.5";
  ASSERT_TRUE(g::detail::parse_tuned_line(ok, &back, &known, &why)) << why;
  for (const char* bad : {"", "X:1,bf16,64,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1",
                          ",bf16,64,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1,1.5",
                          "X:1,fp8,64,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1,1.5",
                          "X:1,bf16,0,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1,1.5",
                          "X:1,bf16,64,256,512,511,512,256,132,pp_128x128_c2x2/along_n/sw1,1.5",
                          "X:1,bf16,64,256,512,512,512,255,132,pp_128x128_c2x2/along_n/sw1,1.5",
                          "X:1,bf16,64x,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1,1.5",
                          "X:1,bf16,64,256,512,512,512,256,0,pp_128x128_c2x2/along_n/sw1,1.5",
                          "X:1,bf16,64,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw3,1.5",
                          "X:1,bf16,64,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1,fast",
                          "X:1,bf16,64,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1,-1",
                          "X:1,bf16,64,256,512,512,512,256,132,pp_128x128_c2x2/along_n/sw1,1.5,extra"}) {
    why.clear();
    EXPECT_FALSE(g::detail::parse_tuned_line(bad, &back, &known, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

// What tuning times: the rule's first plans as ranked_plans gives them, then (from 64 rows) those
// configs at their other divisions — each plan once, each a division its config can run, slices
// of at least 256 columns — and below 64 rows or without divisions the rule's first plans alone.
TEST(GemmTuning, TuningPlansAreTheRulesFirstAndTheirConfigsOtherDivisions) {
  for (int64_t m : {1, 40, 64, 300, 2000, 4095, 9000})
    for (int64_t n : {264, 4096, 28672})
      for (int64_t k : {512, 8192, 16384})
        for (int sms : {132, 78})
          for (int candidates : {1, 5}) {
            const g::GemmShape s = g::packed({m, n, k});
            const std::string where = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                                      " sms " + std::to_string(sms) + " candidates " + std::to_string(candidates);
            g::GemmTuning tuning;
            tuning.candidates = candidates;
            const std::vector<g::GemmPlan> ranked = g::ranked_plans(s, sms, g::kPlainConfigMask, g::PlanUse::plain);
            const size_t firsts = std::min<size_t>(size_t(candidates), ranked.size());
            const std::vector<g::GemmPlan> plans = g::tuning_plans(s, sms, tuning);
            ASSERT_GE(plans.size(), firsts) << where;
            uint64_t first_configs = 0;
            for (size_t i = 0; i < firsts; ++i) {
              EXPECT_TRUE(plans[i] == ranked[i]) << where << " at " << i;
              first_configs |= g::config_bit(ranked[i].config);
            }
            tuning.divisions = false;
            EXPECT_EQ(g::tuning_plans(s, sms, tuning).size(), firsts) << where;
            if (m < g::heuristic::kTimedMinRows) EXPECT_EQ(plans.size(), firsts) << where;
            for (size_t i = 0; i < plans.size(); ++i) {
              const g::GemmPlan& p = plans[i];
              const g::GemmConfigInfo& c = g::config_info(p.config);
              EXPECT_TRUE(first_configs & g::config_bit(p.config)) << where << ": " << g::plan_text(p);
              for (size_t j = 0; j < i; ++j)
                EXPECT_FALSE(plans[j] == p) << where << ": " << g::plan_text(p);
              if (i < firsts) continue;
              switch (p.decomposition) {
                case g::Decomposition::data_parallel: EXPECT_EQ(p.splits, 1) << where; break;
                case g::Decomposition::split_k_reduce:
                  EXPECT_EQ(c.set, g::GemmConfigSet::plain) << where << ": " << g::plan_text(p);
                  EXPECT_GE(p.splits, 2);
                  EXPECT_LE(p.splits, 4);
                  EXPECT_GE(k / p.splits, 256) << where << ": " << g::plan_text(p);
                  break;
                default:
                  EXPECT_EQ(c.schedule, g::GemmSchedule::sk) << where << ": " << g::plan_text(p);
                  EXPECT_GE(k / 2, 256) << where;
              }
            }
          }
  // Narrow N over thousands of rows with a deep K, where a split of K wins and the rule's time
  // model ranks each config at one division: the first configs' whole and split forms are timed.
  const g::GemmShape narrow = g::packed({2000, 304, 8192});
  g::GemmTuning tuning;
  const std::vector<g::GemmPlan> plans = g::tuning_plans(narrow, 132, tuning);
  int reduce = 0, whole = 0;
  for (const g::GemmPlan& p : plans) {
    reduce += p.decomposition == g::Decomposition::split_k_reduce;
    whole += p.decomposition == g::Decomposition::data_parallel;
  }
  EXPECT_GE(reduce, 6);
  EXPECT_GE(whole, 5);
  tuning.candidates = 0;
  EXPECT_THROW(g::tuning_plans(narrow, 132, tuning), tilelink::Error);
}

}  // namespace
