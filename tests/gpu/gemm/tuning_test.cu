// Plain-GEMM tuning: what tune_plain_gemm times and keeps, gemm() with tuning on (once per shape,
// correct results, nothing timed under graph capture), bad input rejected before any launch, and
// the tuned-plans file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gpu/gemm/problem.cuh"
#include "tilelink/core/error.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/gemm/plan_text.hpp"
#include "tilelink/gemm/tuning.hpp"

using namespace tilelink::gemm;
using tilelink::DType;
using namespace tltest;

namespace {

// Turns tuning on for one test and restores the process's state after it.
struct TuningOn {
  const bool before = plain_gemm_tuning();
  TuningOn() {
    set_plain_gemm_tuning(true);
    clear_tuned_plans();
  }
  ~TuningOn() {
    clear_tuned_plans();
    set_plain_gemm_tuning(before);
  }
};

// The rule's first plans and their configs' other divisions, timed: the rule's pick first, each
// timed plan correct on its own, the kept one among them. Few rows (the few-rows model's split
// plans), mid rows, many rows.
TEST(GemmTuning, TimesTheRulesFirstPlansAndKeepsOneOfThem) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const Case& cs : {Case{37, 2048, 8200}, Case{1000, 1376, 2048}, Case{5000, 1000, 520, 528, 0, 1008}}) {
    Problem<__nv_bfloat16> p(cs, 0, seed);
    const std::string where = std::to_string(cs.M) + "x" + std::to_string(cs.N) + "x" + std::to_string(cs.K);
    GemmTuning tuning;
    tuning.candidates = 4;
    tuning.samples = 3;
    const std::vector<GemmPlan> ranked = tuning_plans(p.s, 0, tuning);
    p.poison();
    const GemmTuneResult r = tune_plain_gemm(DType::bf16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, 0, nullptr, tuning);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
    EXPECT_EQ(p.check(false).bad, 0) << where << ": D after tuning is the last timed launch's";
    ASSERT_EQ(r.plans.size(), ranked.size()) << where;
    ASSERT_EQ(r.us.size(), r.plans.size());
    EXPECT_TRUE(r.from_graphs) << where << ": the blocks were not captured as graphs";
    ASSERT_GE(r.best, 0);
    ASSERT_LT(size_t(r.best), r.plans.size());
    for (size_t i = 0; i < r.plans.size(); ++i) {
      EXPECT_TRUE(r.plans[i] == ranked[i]) << where << " plan " << i;
      EXPECT_GT(r.us[i], 0.0) << where;
      // The kept plan is the fastest, or within the 1% the rule's order is given.
      EXPECT_LE(r.us[size_t(r.best)], r.us[i] * 1.0101) << where << " plan " << i;
      p.poison();
      gemm(DType::bf16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, &r.plans[i], 0, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << where;
      const CheckResult c = p.check(false);
      EXPECT_EQ(c.bad, 0) << where << " plan " << i << ": " << c.bad << " bad, first " << c.first;
    }
  }
}

// gemm() without a plan, tuning on: the first call of a shape tunes it (once per shape, leading
// dimensions and budget), every call is correct, and under capture nothing is timed — a shape
// tuned before capture keeps its plan in the graph, a new one runs the rule's.
TEST(GemmTuning, PlainGemmTunesEachShapeOnceAndNotUnderCapture) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TuningOn on;
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Problem<__half> p(Case{700, 2056, 1160}, 1, seed);
  Problem<__half> q(Case{700, 2056, 1160, 1168}, 1, seed + 1);  // the same extents, another lda
  for (int call = 0; call < 3; ++call)
    for (auto* x : {&p, &q}) {
      x->poison();
      gemm(DType::fp16, x->A.ptr, x->B.ptr, x->D.ptr, x->s, nullptr, 0, stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_EQ(x->check(true).bad, 0) << "call " << call;
    }
  EXPECT_EQ(tuned_plan_count(), 2u);
  gemm(DType::fp16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, nullptr, 66, stream);  // another budget
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(tuned_plan_count(), 3u);

  Problem<__half> fresh(Case{333, 1288, 2056}, 1, seed + 2);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  gemm(DType::fp16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, nullptr, 0, stream);
  gemm(DType::fp16, fresh.A.ptr, fresh.B.ptr, fresh.D.ptr, fresh.s, nullptr, 0, stream);
  EXPECT_THROW(tune_plain_gemm(DType::fp16, fresh.A.ptr, fresh.B.ptr, fresh.D.ptr, fresh.s, 0, stream),
               tilelink::Error);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(tuned_plan_count(), 3u) << "nothing may be tuned under capture";
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  p.poison();
  fresh.poison();
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(p.check(true).bad, 0);
  EXPECT_EQ(fresh.check(true).bad, 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // Off again: no tuning, and a cleared table stays empty.
  clear_tuned_plans();
  set_plain_gemm_tuning(false);
  fresh.poison();
  gemm(DType::fp16, fresh.A.ptr, fresh.B.ptr, fresh.D.ptr, fresh.s, nullptr, 0, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(fresh.check(true).bad, 0);
  EXPECT_EQ(tuned_plan_count(), 0u);
  cudaStreamDestroy(stream);
}

TEST(GemmTuning, BadInputIsRejectedBeforeAnyLaunch) {
  TuningOn on;
  DeviceBuffer<__nv_bfloat16> A(1 << 20), B(1 << 20), D(1 << 20);
  fill_value<__nv_bfloat16><<<64, 256>>>(D.ptr, int64_t(D.n), -777.0f);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_THROW(tune_plain_gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 1004, 64}, 0, nullptr), tilelink::Error);
  EXPECT_THROW(tune_plain_gemm(DType::bf16, A.ptr + 1, B.ptr, D.ptr, {128, 128, 64}, 0, nullptr), tilelink::Error);
  GemmTuning none;
  none.candidates = 0;
  EXPECT_THROW(tune_plain_gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 128, 64}, 0, nullptr, none), tilelink::Error);
  EXPECT_THROW(gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 128, 60}, nullptr, 0, nullptr), tilelink::Error);
  EXPECT_EQ(tuned_plan_count(), 0u);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<__nv_bfloat16> d = D.host();
  const float poison = to_f(from_f<__nv_bfloat16>(-777.0f));  // bf16 holds it as -776
  for (size_t i = 0; i < d.size(); i += 4099) ASSERT_EQ(to_f(d[i]), poison) << "D written at " << i;
}

// Lines of a tuned-plans file, one per shape.
std::vector<std::string> plan_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l[0] != '#') lines.push_back(l);
  return lines;
}

// The tuned-plans file: gemm() appends what it tunes to TILELINK_GEMM_TUNE_FILE and takes it back
// after a clear (no second tuning); save/load carry a table; only lines of this GPU model whose
// plan the rule still ranks are taken; a malformed line is an error naming file and line.
TEST(GemmTuning, TunedPlansFileIsReadAppendedAndCheckedAgainstTheRule) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "tilelink_tuned_" + std::to_string(seed) + ".csv";
  const std::string saved = file + ".saved";
  std::remove(file.c_str());
  struct FileFromEnvironment {  // unset again however the test ends
    explicit FileFromEnvironment(const std::string& path) { setenv("TILELINK_GEMM_TUNE_FILE", path.c_str(), 1); }
    ~FileFromEnvironment() { unsetenv("TILELINK_GEMM_TUNE_FILE"); }
  } from_env(file);
  TuningOn on;
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  const std::string gpu = detail::gpu_model_name(device);
  Problem<__nv_bfloat16> p(Case{700, 2056, 1160}, 0, seed);

  p.poison();
  gemm(DType::bf16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, nullptr, 0, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(p.check(false).bad, 0);
  std::vector<std::string> lines = plan_lines(file);
  ASSERT_EQ(lines.size(), 1u) << "one line per tuned shape";
  detail::TunedLine line;
  bool known = false;
  std::string why;
  ASSERT_TRUE(detail::parse_tuned_line(lines[0], &line, &known, &why)) << why;
  EXPECT_TRUE(known);
  EXPECT_EQ(line.gpu, gpu);
  EXPECT_EQ(line.shape.M, 700);
  EXPECT_EQ(line.shape.ldd, 2056);
  EXPECT_GT(line.us, 0.0);
  const GemmPlan kept = detail::plain_call_plan(DType::bf16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, 0, nullptr);
  EXPECT_TRUE(kept == line.plan);

  // A cleared table reads the file again: the shape is not tuned a second time.
  clear_tuned_plans();
  EXPECT_EQ(tuned_plan_count(), 0u);
  p.poison();
  gemm(DType::bf16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, nullptr, 0, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(p.check(false).bad, 0);
  EXPECT_EQ(tuned_plan_count(), 1u);
  EXPECT_EQ(plan_lines(file).size(), 1u) << "taken from the file, not tuned again";

  // save / load, without the environment variable.
  ASSERT_EQ(unsetenv("TILELINK_GEMM_TUNE_FILE"), 0);
  EXPECT_EQ(save_tuned_plans(saved), 1u);
  clear_tuned_plans();
  EXPECT_EQ(load_tuned_plans(saved), 1u);
  EXPECT_TRUE(detail::plain_call_plan(DType::bf16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, 0, nullptr) == kept);

  // Which lines are taken: this GPU model's, with a plan the rule ranks for the shape.
  clear_tuned_plans();
  Problem<__nv_bfloat16> q(Case{3000, 1000, 4000}, 0, seed + 1);
  const std::vector<GemmPlan> ranked = ranked_plans(q.s, 0, kPlainConfigMask, PlanUse::plain);
  ASSERT_GE(ranked.size(), 2u);
  const int sms = detail::device_sm_count(device);
  auto text = [&](const std::string& g, const std::string& plan) {
    return g + ",bf16,3000,1000,4000,4000,4000,1000," + std::to_string(sms) + "," + plan + ",12.5";
  };
  GemmPlan few_rows_plan;  // a 64x16 swapped tile: never ranked at 3000 rows
  ASSERT_TRUE(parse_config("ppba_64x16_c1x1", &few_rows_plan.config));
  {
    std::ofstream out(file, std::ios::trunc);
    out << "# a comment\n\n"
        << text("Some Other GPU:1", plan_text(ranked[1])) << "\n"
        << text(gpu, "coop_999x999_c1x1/along_n/sw1") << "\n"
        << text(gpu, plan_text(few_rows_plan)) << "\n"
        << text(gpu, plan_text(ranked[1])) << "\n"
        << text(gpu, plan_text(ranked[0])) << "\n";  // the same shape again: the first line stays
  }
  EXPECT_EQ(load_tuned_plans(file), 1u);
  EXPECT_TRUE(detail::plain_call_plan(DType::bf16, q.A.ptr, q.B.ptr, q.D.ptr, q.s, 0, nullptr) == ranked[1]);
  q.poison();
  gemm(DType::bf16, q.A.ptr, q.B.ptr, q.D.ptr, q.s, nullptr, 0, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(q.check(false).bad, 0);

  {
    std::ofstream out(file, std::ios::app);
    out << gpu << ",bf16,3000,1000\n";
  }
  try {
    load_tuned_plans(file);
    ADD_FAILURE() << "a malformed line must throw";
  } catch (const tilelink::Error& e) {
    EXPECT_NE(std::string(e.what()).find(file + ":8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_tuned_plans(file + ".missing"), tilelink::Error);
  std::remove(file.c_str());
  std::remove(saved.c_str());
}

}  // namespace
