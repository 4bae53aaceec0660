// gemm_rs and gemm_ar on in-process worlds of 1 to 8 ranks on the visible GPUs: every
// algorithm and mode, fused and decomposed, reference shapes scaled to fit, bf16 and fp16.
// Each case: fresh random A, B per rank; C poisoned with NaN; C checked against the fp32 cuBLAS
// sum over all ranks' A_q·B_qᵀ (every rank computes it from all ranks' inputs). Then 1,000
// back-to-back calls with random shapes and one rank starting late.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "gpu/ops/op_cases.hpp"

namespace tt = tilelink::test;
using tilelink::Context;
using tilelink::DType;

namespace {

struct Shape {
  int64_t m, n, k;  // k: per rank
};

using Variant = tt::ReduceVariant;

struct RankBuffers {
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  float* ref = nullptr;
  void alloc(const Shape& s) {
    TL_CUDA_CHECK(cudaMalloc(&a, s.m * s.k * 2));
    TL_CUDA_CHECK(cudaMalloc(&b, s.n * s.k * 2));
    TL_CUDA_CHECK(cudaMalloc(&c, s.m * s.n * 2));
    TL_CUDA_CHECK(cudaMalloc(&ref, s.m * s.n * 4));
  }
  void release() {
    for (void* p : {a, b, c, static_cast<void*>(ref)}) cudaFree(p);
  }
};

void call(Context& ctx, const Variant& v, DType dt, const RankBuffers& mine, const Shape& s) {
  tt::call_reduce(ctx, v, dt, mine.a, mine.b, mine.c, s.m, s.n, s.k);
}

// ref = Σ_q A_q·B_qᵀ over all ranks' inputs; compare this rank's output rows.
void check_rank(Context& ctx, const Variant& v, DType dt, std::vector<RankBuffers>& bufs, const Shape& s,
                const std::string& what) {
  const int r = ctx.rank(), w = ctx.num_ranks();
  cudaStream_t st = ctx.stream();
  RankBuffers& mine = bufs[r];
  for (int q = 0; q < w; ++q)
    tt::reference_gemm(dt, bufs[q].a, bufs[q].b, mine.ref, s.m, s.n, s.k, st, 1, 0, 0, q == 0 ? 0.0f : 1.0f);
  const int64_t rows = v.all_reduce ? s.m : s.m / w;
  const float* ref_rows = mine.ref + (v.all_reduce ? 0 : int64_t(r) * rows * s.n);
  const auto tol = tt::reduce_tolerance(dt, s.k, w, v.rounds_per_hop());
  const auto cmp = tt::compare(dt, mine.c, s.n, ref_rows, rows, s.n, tol.atol, tol.rtol, st);
  EXPECT_EQ(cmp.bad, 0) << what << " rank " << r << ": " << tt::describe(cmp);
  EXPECT_LT(cmp.rel_fro, tol.rel_fro) << what << " rank " << r << ": " << tt::describe(cmp);
}

void run_case(tilelink::InProcessWorld& world, const Variant& v, const Shape& s, DType dt, uint64_t seed) {
  std::vector<RankBuffers> bufs(world.size());
  world.run([&](Context& ctx) {
    const int r = ctx.rank();
    cudaStream_t st = ctx.stream();
    RankBuffers& mine = bufs[r];
    mine.alloc(s);
    tt::fill_uniform(dt, mine.a, s.m * s.k, tt::mix_seed(seed, r, 1), 1.0f, st);
    tt::fill_uniform(dt, mine.b, s.n * s.k, tt::mix_seed(seed, r, 2), 1.0f, st);
    tt::poison_nan(dt, mine.c, s.m * s.n, st);
    ctx.synchronize("the previous calls (checked before new test data)");
    ctx.barrier();
    call(ctx, v, dt, mine, s);
    ctx.synchronize(v.all_reduce ? "gemm_ar" : "gemm_rs");
    check_rank(ctx, v, dt, bufs, s, v.name());
    ctx.barrier();  // every rank has read every rank's A for its reference before A changes
    // A second call on fresh data (the buffers and signals are reused: the hand-over between calls).
    tt::fill_uniform(dt, mine.a, s.m * s.k, tt::mix_seed(seed, r, 3), 1.0f, st);
    tt::poison_nan(dt, mine.c, s.m * s.n, st);
    ctx.synchronize("the previous calls (checked before new test data)");
    ctx.barrier();
    call(ctx, v, dt, mine, s);
    ctx.synchronize(v.all_reduce ? "gemm_ar" : "gemm_rs");
    check_rank(ctx, v, dt, bufs, s, v.name() + " (second call)");
    ctx.barrier();
    mine.release();
  });
}

class ReduceOps : public tt::WorldSizeTest {};

TEST_P(ReduceOps, EveryVariantMatchesReference) {
  // reference GEMM-RS shapes scaled: K divided by 8 as on 8 ranks, M reduced (to a multiple
  // of the world size, which reduce-scatter needs).
  const int64_t w = ranks();
  const Shape shapes[] = {{1024 / w * w, 4096, 1376}, {512 / w * w, 3584, 1792}};
  for (const Variant& v : tt::all_reduce_variants())
    for (const Shape& s : shapes) {
      const uint64_t seed = tt::fresh_seed();
      SCOPED_TRACE(tt::seed_trace(seed) + " " + v.name() + " m " + std::to_string(s.m) + " n " +
                   std::to_string(s.n) + " k " + std::to_string(s.k));
      run_case(world(), v, s, DType::bf16, seed);
    }
}

TEST_P(ReduceOps, OddShapesAndFp16) {
  // m/W not a multiple of the GEMM tile (units straddle rank blocks); tiny M (decode).
  const int w = ranks();
  const Shape shapes[] = {{int64_t(104) * w, 264, 520}, {int64_t(w), 1024, 256}, {int64_t(24) * w, 72, 64}};
  for (const Variant& v : tt::all_reduce_variants())
    for (const Shape& s : shapes)
      for (DType dt : {DType::bf16, DType::fp16}) {
        const uint64_t seed = tt::fresh_seed();
        SCOPED_TRACE(tt::seed_trace(seed) + " " + v.name() + " " + tilelink::dtype_name(dt) + " m " +
                     std::to_string(s.m) + " n " + std::to_string(s.n) + " k " + std::to_string(s.k));
        run_case(world(), v, s, dt, seed);
      }
}

// Any M on any world size, both algorithms, fused and decomposed: two_shot splits rows that do
// not divide evenly into blocks one row apart (some empty when M < W).
TEST_P(ReduceOps, AllReduceAnyM) {
  for (auto algo : {tilelink::ArAlgo::one_shot, tilelink::ArAlgo::two_shot})
    for (auto path : {tilelink::ReducePath::fused, tilelink::ReducePath::decomposed}) {
      const Variant v{true, tilelink::RsAlgo::ring, tilelink::CommMode::pull, algo, path};
      for (int64_t m : {int64_t(1), int64_t(3), int64_t(129), int64_t(16 * ranks() + 5)}) {
        const uint64_t seed = tt::fresh_seed();
        SCOPED_TRACE(tt::seed_trace(seed) + " " + v.name() + " m " + std::to_string(m));
        run_case(world(), v, {m, 512, 256}, DType::bf16, seed);
      }
    }
}

TEST_P(ReduceOps, StressRandomShapesOneRankLate) {
  const int calls = 1000, w = ranks();
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const auto variants = tt::all_reduce_variants();
  const Shape max_shape{int64_t(64) * w, 512, 512};
  std::vector<RankBuffers> bufs(w);
  world().run([&](Context& ctx) {
    const int r = ctx.rank();
    cudaStream_t st = ctx.stream();
    RankBuffers& mine = bufs[r];
    mine.alloc(max_shape);
    std::mt19937_64 rng(seed);  // same sequence on every rank
    // Allocation may wait for the device: all ranks finish them before any
    // rank's calls (whose kernels wait for the others) start.
    ctx.barrier();
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<std::string> history;  // printed by rank 0 if a call fails: which calls preceded it
    try {
    for (int i = 0; i < calls; ++i) {
      const Variant& v = variants[rng() % variants.size()];
      // Reduce-scatter needs M divisible by W; the all-reduce takes any M.
      const int64_t blocks = int64_t(1 + rng() % 64), any_m = int64_t(1 + rng() % (64 * w));
      const Shape s{v.all_reduce ? any_m : int64_t(w) * blocks, int64_t(8 * (1 + rng() % 64)),
                    int64_t(8 * (1 + rng() % 64))};
      if (r == 0)
        history.push_back("call " + std::to_string(i) + " epoch " + std::to_string(ctx.epoch() + 1) + ": " +
                          v.name() + " m " + std::to_string(s.m) + " n " + std::to_string(s.n) + " k " +
                          std::to_string(s.k));
      const bool check = i % 50 == 49;
      if (check) {
        tt::fill_uniform(DType::bf16, mine.a, s.m * s.k, tt::mix_seed(seed, r, i), 1.0f, st);
        tt::fill_uniform(DType::bf16, mine.b, s.n * s.k, tt::mix_seed(seed, r, i, 1), 1.0f, st);
        tt::poison_nan(DType::bf16, mine.c, s.m * s.n, st);
        ctx.synchronize("the previous calls (checked before new test data)");
        ctx.barrier();
      }
      call(ctx, v, DType::bf16, mine, s);
      if (check) {
        ctx.synchronize("stress");
        check_rank(ctx, v, DType::bf16, bufs, s, "call " + std::to_string(i) + " " + v.name());
        ctx.barrier();  // peers read my A/B for their references
      }
    }
    ctx.synchronize("stress");
    } catch (...) {
      for (size_t j = history.size() > 60 ? history.size() - 60 : 0; j < history.size(); ++j)
        std::fprintf(stderr, "stress history (rank 0): %s\n", history[j].c_str());
      throw;
    }
    ctx.barrier();
    mine.release();
  });
}

// The call pair after which the 8-rank stress run once hung (a full-mesh pull whose owner never
// saw a peer's tile notification), replayed many times with checked results.
TEST_P(ReduceOps, ReplayRingPushThenFullMeshPullNarrowN) {
  const Variant ring{false, tilelink::RsAlgo::ring, tilelink::CommMode::push, tilelink::ArAlgo::automatic,
                     tilelink::ReducePath::fused};
  const Variant mesh{false, tilelink::RsAlgo::full_mesh, tilelink::CommMode::pull, tilelink::ArAlgo::automatic,
                     tilelink::ReducePath::fused};
  const int w = ranks();
  for (int rep = 0; rep < 20; ++rep) {
    const uint64_t seed = tt::fresh_seed();
    SCOPED_TRACE(tt::seed_trace(seed) + " rep " + std::to_string(rep));
    run_case(world(), ring, {int64_t(26) * w, 312, 464}, DType::bf16, seed);
    run_case(world(), mesh, {int64_t(37) * w, 24, 200}, DType::bf16, seed + 1);
  }
}

TEST(ReduceOpsInput, RejectsBadShapes) {
  auto& world = tt::world(2);
  world.run([&](Context& ctx) {
    void* buf = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&buf, 1 << 20));
    auto expect_error = [&](auto fn, const char* needle) {
      try {
        fn();
        ADD_FAILURE() << "no error for " << needle;
      } catch (const tilelink::Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    };
    expect_error([&] { tilelink::gemm_rs(ctx, {DType::bf16, buf, buf, buf, 33, 64, 64}); }, "divisible by the world size");
    expect_error([&] { tilelink::gemm_rs(ctx, {DType::bf16, buf, buf, buf, 64, 60, 64}); }, "n=60");
    // K may differ per rank (uneven K shards); M may not.
    expect_error([&] { tilelink::gemm_rs(ctx, {DType::bf16, buf, buf, buf, 64 + 16 * ctx.rank(), 64, 64}); },
                 "m differs across ranks");
    TL_CUDA_CHECK(cudaFree(buf));
  });
}

TILELINK_WORLD_SIZES(ReduceOps);

}  // namespace
