// Correctness of every library GEMM config (NoHooks) against an fp32 reference, both dtypes,
// ragged shapes, leading dimensions, tile orders and SM budgets; the plain configs' work
// divisions (split-K, stream-K, K slices with a separate sum, swapped operands); input validation.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/gemm/problem.cuh"
#include "gpu/gemm/reference.cuh"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/gemm/hooks.cuh"
#include "tilelink/core/error.hpp"

using namespace tilelink::gemm;
using tilelink::DType;
using namespace tltest;

namespace {

const Case kCases[] = {
    {1000, 1000, 4104},                     // ragged M, N; K not a multiple of the 64-wide k tile
    {1000, 1016, 520},                      // N = 1000 + 8*2
    {1, 256, 1024},                         // one row
    {127, 136, 72},                         // below one tile in M, ragged N
    {129, 264, 8},                          // one element past a tile; K = 8
    {256, 8, 4096},                         // N = 8
    {2048, 1376, 512},                      // reference AG-GEMM N / 8
    {8, 8, 8},                              // tiny
    {300, 200, 136, 144, 160, 208},         // leading dimensions larger than the extents
    {777, 1096, 1160},
};

std::string describe(const GemmShape& s, const GemmPlan& p, int budget) {
  char buf[320];
  snprintf(buf, sizeof buf,
           "M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldd=%lld config=%s raster=%s swizzle=%d %s splits=%d budget=%d",
           (long long)s.M, (long long)s.N, (long long)s.K, (long long)s.lda, (long long)s.ldb, (long long)s.ldd,
           config_name(p.config), raster_name(p.raster), p.swizzle, decomposition_name(p.decomposition), p.splits,
           budget);
  return buf;
}

std::vector<GemmConfig> configs_of(GemmConfigSet set) {
  std::vector<GemmConfig> v;
  for (int i = 0; i < kNumGemmConfigs; ++i)
    if (kGemmConfigInfo[i].set == set) v.push_back(static_cast<GemmConfig>(i));
  return v;
}
std::vector<GemmConfig> lib_configs() { return configs_of(GemmConfigSet::lib); }

// Every work division a plain config runs: whole tiles and K split with a separate sum (2, 3,
// 5, 9 slices: most cases leave a tail of K columns to the summing pass); on the stream-K
// scheduler also K split 2, 3 and 7 ways (uneven slices when K / 64 is not a multiple) and
// stream-K; each division also along M (the plain GEMM's order when its tile grid is wider than
// tall).
std::vector<GemmPlan> plain_plans() {
  std::vector<GemmPlan> v;
  for (GemmConfig c : configs_of(GemmConfigSet::plain)) {
    const bool stream_k_scheduler = config_info(c).schedule == GemmSchedule::sk;
    v.push_back(GemmPlan{c});
    for (int splits : {2, 3, 5, 9}) v.push_back(GemmPlan{c, Raster::along_n, 1, Decomposition::split_k_reduce, splits});
    v.push_back(GemmPlan{c, Raster::along_m, 1});
    v.push_back(GemmPlan{c, Raster::along_m, 1, Decomposition::split_k_reduce, 5});
    if (!stream_k_scheduler) continue;
    for (int splits : {2, 3, 7}) v.push_back(GemmPlan{c, Raster::along_n, 1, Decomposition::split_k, splits});
    v.push_back(GemmPlan{c, Raster::along_n, 1, Decomposition::stream_k, 1});
    v.push_back(GemmPlan{c, Raster::along_m, 1, Decomposition::split_k, 3});
    v.push_back(GemmPlan{c, Raster::along_m, 1, Decomposition::stream_k, 1});
  }
  return v;
}

// split_k_reduce needs a whole 8-element step per slice; shorter K are refused (tested below).
bool runs_on(const GemmPlan& p, const GemmShape& s) {
  return p.decomposition != Decomposition::split_k_reduce || s.K >= 8 * int64_t(p.splits);
}

std::vector<GemmPlan> lib_plans() {
  std::vector<GemmPlan> v;
  for (GemmConfig cfg : lib_configs()) v.push_back(GemmPlan{cfg, Raster::along_n, 1});
  return v;
}

// A budget below one of the plan's clusters cannot launch it (the engine rejects it before
// launch): such a plan gets the smallest odd budget that holds a cluster instead.
int budget_for(const GemmPlan& plan, int budget) {
  const GemmConfigInfo& c = config_info(plan.config);
  const int cluster = c.cluster_m * c.cluster_n;
  return budget > 0 && budget < cluster ? (cluster | 1) : budget;
}

// Every case x plan x SM budget against the fp32 reference (bitwise in mode 1).
template <class T>
void run_plans(int mode, const std::vector<GemmPlan>& plans, std::initializer_list<int> budgets) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const Case& cs : kCases) {
    Problem<T> p(cs, mode, seed);
    for (const GemmPlan& plan : plans) {
      if (!runs_on(plan, p.s)) continue;
      for (int asked : budgets) {
        const int budget = budget_for(plan, asked);
        p.poison();
        run_gemm(GemmArgs<T>{p.A.ptr, p.B.ptr, p.D.ptr, p.s}, NoHooks{}, plan, budget, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << describe(p.s, plan, budget);
        const CheckResult r = p.check(mode == 1);
        EXPECT_EQ(r.bad, 0) << describe(p.s, plan, budget) << ": " << r.bad << " bad, first " << r.first
                            << ", max err " << r.max_err;
      }
    }
  }
}
template <class T>
void run_all_configs(int mode) {
  run_plans<T>(mode, lib_plans(), {0});
}
template <class T>
void run_plain_plans(int mode) {
  run_plans<T>(mode, plain_plans(), {0, 7});
}

}  // namespace

TEST(Gemm, PlainConfigsEveryDivisionBf16Uniform) { run_plain_plans<__nv_bfloat16>(0); }
TEST(Gemm, PlainConfigsEveryDivisionFp16ExactBitwise) { run_plain_plans<__half>(1); }

// Split-K reduces in a fixed order: the same inputs give the same bits every time; a caller's
// workspace works like the engine's own; a split GEMM captured in a CUDA graph replays correctly.
TEST(Gemm, SplitKIsDeterministicTakesACallerWorkspaceAndReplaysInAGraph) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Problem<__nv_bfloat16> p(Case{37, 1096, 8200}, 0, seed);
  const GemmPlan plan{GemmConfig::skba_128x64_c1x1, Raster::along_n, 1, Decomposition::split_k, 5};
  const GemmArgs<__nv_bfloat16> args{p.A.ptr, p.B.ptr, p.D.ptr, p.s};
  p.poison();
  run_gemm(args, NoHooks{}, plan, 0, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<__nv_bfloat16> first = p.D.host();
  EXPECT_EQ(p.check(false).bad, 0) << describe(p.s, plan, 0);

  const size_t bytes = gemm_workspace_bytes(p.s, DType::bf16, plan, 0);
  EXPECT_GT(bytes, 0u);
  DeviceBuffer<char> ws(bytes + 256);
  GemmLaunchOptions opt = launch_options(plan, 0);
  opt.workspace = ws.ptr;
  opt.workspace_bytes = bytes;
  p.poison();
  gemm_launch<__nv_bfloat16, NoHooks, GemmConfig::skba_128x64_c1x1>(args, NoHooks{}, opt, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<__nv_bfloat16> second = p.D.host();
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(first[0])), 0)
      << "split-K results differ between two runs";
  opt.workspace_bytes = bytes - 1;
  const auto launch_with_short_workspace = [&] {
    gemm_launch<__nv_bfloat16, NoHooks, GemmConfig::skba_128x64_c1x1>(args, NoHooks{}, opt, nullptr);
  };
  EXPECT_THROW(launch_with_short_workspace(), tilelink::Error);

  // The separate reduction pass: also repeatable bit for bit (its order of additions is fixed).
  const GemmPlan reduce{GemmConfig::skba_128x64_c1x1, Raster::along_n, 1, Decomposition::split_k_reduce, 25};
  std::vector<__nv_bfloat16> reduced[2];
  for (auto& out : reduced) {
    p.poison();
    run_gemm(args, NoHooks{}, reduce, 0, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(p.check(false).bad, 0) << describe(p.s, reduce, 0);
    out = p.D.host();
  }
  EXPECT_EQ(std::memcmp(reduced[0].data(), reduced[1].data(), reduced[0].size() * sizeof(reduced[0][0])), 0)
      << "split_k_reduce results differ between two runs";
  EXPECT_GT(gemm_workspace_bytes(p.s, DType::bf16, reduce, 0), size_t(25) * 37 * 1096 * 4);

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  run_gemm(args, NoHooks{}, plan, 0, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    p.poison();
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(p.check(false).bad, 0) << "graph replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// A plain launch overlaps the previous kernel on the stream (programmatic dependent launch) but
// must not read its operands before that kernel is done: A is rewritten by a kernel queued just
// before the GEMM, with no synchronisation between them, and D must be the new A's product.
TEST(Gemm, PlainLaunchReadsWhatThePreviousKernelWrote) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const Case& cs : {Case{5, 2048, 4096}, Case{1000, 1376, 2048}}) {
    Problem<__nv_bfloat16> p(cs, 0, seed);  // the reference is for these inputs
    const GemmPlan chosen = choose_config(p.s, DType::bf16, 0, kPlainConfigMask, PlanUse::plain);
    for (const GemmPlan& plan : {chosen, GemmPlan{GemmConfig::pp_128x128_c2x1}}) {
      fill_random<__nv_bfloat16><<<256, 256>>>(p.A.ptr, p.s.M, p.s.K, p.s.lda, seed + 1, 0);  // stale A
      p.poison();
      fill_random<__nv_bfloat16><<<4, 64>>>(p.A.ptr, p.s.M, p.s.K, p.s.lda, seed, 0);  // slow: few threads
      run_gemm(GemmArgs<__nv_bfloat16>{p.A.ptr, p.B.ptr, p.D.ptr, p.s}, NoHooks{}, plan, 0, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << describe(p.s, plan, 0);
      const CheckResult r = p.check(false);
      EXPECT_EQ(r.bad, 0) << describe(p.s, plan, 0) << ": " << r.bad << " bad, first " << r.first;
    }
  }
}

TEST(Gemm, AllLibConfigsBf16Uniform) { run_all_configs<__nv_bfloat16>(0); }
TEST(Gemm, AllLibConfigsFp16Uniform) { run_all_configs<__half>(0); }
TEST(Gemm, AllLibConfigsBf16ExactBitwise) { run_all_configs<__nv_bfloat16>(1); }
TEST(Gemm, AllLibConfigsFp16ExactBitwise) { run_all_configs<__half>(1); }

// Tile orders and SM budgets exercise the scheduler: raster along M/N, swizzle 1..8 (the
// swizzle pads the tile grid; padded units must be skipped, real ones computed once), a budget
// of one cluster (every CTA walks many tiles), an odd budget.
TEST(Gemm, RasterSwizzleBudget) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const Case& cs : {Case{1000, 1376, 264}, Case{2304, 3696, 128}}) {
    Problem<__nv_bfloat16> p(cs, 1, seed);
    for (GemmConfig cfg : lib_configs()) {
      for (Raster r : {Raster::along_m, Raster::along_n, Raster::heuristic}) {
        for (int sw : {1, 2, 4, 8}) {
          for (int budget : {0, 2, 7, 66}) {
            if (budget == 2 && (sw != 1 || r == Raster::heuristic)) continue;  // slow; one variant suffices
            const GemmPlan plan{cfg, r, sw};
            p.poison();
            run_gemm(GemmArgs<__nv_bfloat16>{p.A.ptr, p.B.ptr, p.D.ptr, p.s}, NoHooks{}, plan, budget, nullptr);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << describe(p.s, plan, budget);
            const CheckResult res = p.check(true);
            EXPECT_EQ(res.bad, 0) << describe(p.s, plan, budget) << ": " << res.bad << " bad, first " << res.first;
          }
        }
      }
    }
  }
}

TEST(Gemm, RuntimeDtypeEntryAndHeuristic) {
  const uint64_t seed = fresh_seed();
  Problem<__half> p(Case{512, 1792, 4096}, 1, seed);
  p.poison();
  gemm(DType::fp16, p.A.ptr, p.B.ptr, p.D.ptr, p.s, nullptr, 0, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(p.check(true).bad, 0);
  // choose_config returns library configs by default (what the fused ops are compiled for), lib
  // or plain ones for the plain GEMM, for any shape and budget.
  for (int64_t M : {1, 128, 1000, 8192})
    for (int64_t N : {8, 1376, 4096, 6656})
      for (int budget : {0, 16, 66, 132}) {
        const GemmPlan plan = choose_config(GemmShape{M, N, 4096}, DType::bf16, budget);
        EXPECT_EQ(config_info(plan.config).set, GemmConfigSet::lib);
        EXPECT_EQ(plan.decomposition, Decomposition::data_parallel);
        const GemmPlan plain = choose_config(GemmShape{M, N, 4096}, DType::bf16, budget, kPlainConfigMask, PlanUse::plain);
        EXPECT_NE(config_info(plain.config).set, GemmConfigSet::sweep);
      }
  // The plain entry point with its own choice, on a short grid (split across K).
  Problem<__nv_bfloat16> q(Case{5, 2048, 16384}, 0, seed);
  q.poison();
  gemm(DType::bf16, q.A.ptr, q.B.ptr, q.D.ptr, q.s, nullptr, 0, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(q.check(false).bad, 0);
}

TEST(Gemm, BadInputIsRejectedBeforeLaunch) {
  DeviceBuffer<__nv_bfloat16> A(1 << 20), B(1 << 20), D(1 << 20);
  auto run = [&](GemmShape s, const void* a, const void* b, void* d) {
    gemm(DType::bf16, a, b, d, s, nullptr, 0, nullptr);
  };
  EXPECT_THROW(run({128, 1004, 64}, A.ptr, B.ptr, D.ptr), tilelink::Error);                    // N % 8
  EXPECT_THROW(run({128, 128, 60}, A.ptr, B.ptr, D.ptr), tilelink::Error);                     // K % 8
  EXPECT_THROW(run({128, 128, 0}, A.ptr, B.ptr, D.ptr), tilelink::Error);                      // K == 0
  EXPECT_THROW(run({128, 128, 64, 32}, A.ptr, B.ptr, D.ptr), tilelink::Error);                 // lda < K
  EXPECT_THROW(run({128, 128, 64, 68}, A.ptr, B.ptr, D.ptr), tilelink::Error);                 // lda % 8
  EXPECT_THROW(run({128, 128, 64, 0, 0, 120}, A.ptr, B.ptr, D.ptr), tilelink::Error);          // ldd < N
  EXPECT_THROW(run({128, 128, 64}, A.ptr + 1, B.ptr, D.ptr), tilelink::Error);                 // misaligned A
  EXPECT_THROW(run({128, 128, 64}, A.ptr, B.ptr + 4, D.ptr), tilelink::Error);                 // misaligned B
  EXPECT_THROW(run({128, 128, 64}, A.ptr, B.ptr, D.ptr + 2), tilelink::Error);                 // misaligned D
  EXPECT_THROW(run({128, 128, 64}, nullptr, B.ptr, D.ptr), tilelink::Error);                   // null
  EXPECT_THROW(gemm(static_cast<DType>(7), A.ptr, B.ptr, D.ptr, {128, 128, 64}, nullptr, 0, nullptr),
               tilelink::Error);                                                               // dtype
  const GemmPlan sweep_only{GemmConfig::coop_128x256_c1x1, Raster::along_n, 1};
  if (config_info(sweep_only.config).set == GemmConfigSet::sweep) {
    EXPECT_THROW(gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 128, 64}, &sweep_only, 0, nullptr), tilelink::Error);
  }
  const GemmPlan bad_swizzle{GemmConfig::coop_128x256_c2x1, Raster::along_n, 3};
  EXPECT_THROW(gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 128, 64}, &bad_swizzle, 0, nullptr), tilelink::Error);
  // Split-K needs an `sk` config and 2..kMaxSplits slices.
  const GemmPlan split_dp{GemmConfig::coop_128x256_c2x1, Raster::along_n, 1, Decomposition::split_k, 4};
  EXPECT_THROW(gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 128, 512}, &split_dp, 0, nullptr), tilelink::Error);
  for (int splits : {1, kMaxSplits + 1}) {
    const GemmPlan bad_splits{GemmConfig::sk_128x128_c1x1, Raster::along_n, 1, Decomposition::split_k, splits};
    EXPECT_THROW(gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 128, 512}, &bad_splits, 0, nullptr), tilelink::Error);
  }
  // split_k_reduce: a `plain` config, and a whole 8-element step of K per slice (16 < 3 x 8);
  // split-K and stream-K: a config on the stream-K scheduler.
  const GemmPlan reduce_dp{GemmConfig::pp_128x128_c2x1, Raster::along_n, 1, Decomposition::split_k_reduce, 2};
  EXPECT_THROW(gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 128, 512}, &reduce_dp, 0, nullptr), tilelink::Error);
  const GemmPlan reduce_3{GemmConfig::sk_128x128_c1x1, Raster::along_n, 1, Decomposition::split_k_reduce, 3};
  EXPECT_THROW(gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {128, 128, 16}, &reduce_3, 0, nullptr), tilelink::Error);
  const GemmPlan narrow_split{GemmConfig::ppba_64x16_c1x1, Raster::along_n, 1, Decomposition::split_k, 2};
  EXPECT_THROW(gemm(DType::bf16, A.ptr, B.ptr, D.ptr, {16, 128, 512}, &narrow_split, 0, nullptr), tilelink::Error);
  // Empty problems launch nothing and succeed.
  EXPECT_NO_THROW(run({0, 128, 64}, A.ptr, B.ptr, D.ptr));
  EXPECT_NO_THROW(run({128, 0, 64}, A.ptr, B.ptr, D.ptr));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}
