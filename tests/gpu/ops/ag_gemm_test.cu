// ag_gemm on in-process worlds of 1 to 8 ranks on the visible GPUs: every mode (push/pull x
// SM/copy engine, decomposed, automatic), reference shapes scaled to fit, odd M, bf16 and fp16. Each case: fresh random
// A and B per rank, C and the gathered A poisoned with NaN, C checked against an fp32 cuBLAS
// reference over the gathered A (built from every rank's A), the gathered A checked bitwise, and
// C checked bitwise against the same op with communication disabled. Then a stress loop of
// back-to-back calls with random shapes and one rank starting late.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "gpu/ops/op_cases.hpp"

namespace tt = tilelink::test;
using tilelink::AgGemmArgs;
using tilelink::AgGemmOptions;
using tilelink::CommEngine;
using tilelink::CommMode;
using tilelink::Context;
using tilelink::DType;

namespace {

struct Shape {
  int64_t m_per_rank, n, k;
};

using Mode = tt::AgMode;
constexpr const auto& kModes = tt::kAgModes;
using tt::mode_name;

// Device buffers of one rank for one case.
struct RankBuffers {
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  void* c2 = nullptr;
  void* gathered = nullptr;
  float* ref = nullptr;
  void alloc(const Shape& s, int world) {
    const int64_t m = s.m_per_rank * world;
    TL_CUDA_CHECK(cudaMalloc(&a, s.m_per_rank * s.k * 2));
    TL_CUDA_CHECK(cudaMalloc(&b, s.n * s.k * 2));
    TL_CUDA_CHECK(cudaMalloc(&c, m * s.n * 2));
    TL_CUDA_CHECK(cudaMalloc(&c2, m * s.n * 2));
    TL_CUDA_CHECK(cudaMalloc(&gathered, m * s.k * 2));
    TL_CUDA_CHECK(cudaMalloc(&ref, m * s.n * 4));
  }
  void release() {
    for (void* p : {a, b, c, c2, gathered, static_cast<void*>(ref)}) cudaFree(p);
  }
};

// Runs one case on every rank of `world`; returns nothing, records failures with gtest.
void run_case(tilelink::InProcessWorld& world, const Shape& s, DType dtype, const Mode& mode,
              uint64_t seed) {
  // Failures inside world.run happen on the ranks' threads, where SCOPED_TRACE does not reach.
  const std::string what = mode_name(mode) + " " + tilelink::dtype_name(dtype) + " m_per_rank " +
                           std::to_string(s.m_per_rank) + " n " + std::to_string(s.n) + " k " +
                           std::to_string(s.k) + " " + tt::seed_trace(seed) + ", rank ";
  const int w = world.size();
  std::vector<RankBuffers> bufs(w);
  world.run([&](Context& ctx) {
    const int r = ctx.rank();
    cudaStream_t st = ctx.stream();
    RankBuffers& mine = bufs[r];
    mine.alloc(s, w);
    const int64_t m = s.m_per_rank * w;
    tt::fill_uniform(dtype, mine.a, s.m_per_rank * s.k, tt::mix_seed(seed, r, 1), 1.0f, st);
    tt::fill_uniform(dtype, mine.b, s.n * s.k, tt::mix_seed(seed, r, 2), 1.0f, st);
    tt::poison_nan(dtype, mine.c, m * s.n, st);
    tt::poison_nan(dtype, mine.c2, m * s.n, st);
    tt::poison_nan(dtype, mine.gathered, m * s.k, st);
    ctx.synchronize("the previous calls (checked before new test data)");
    ctx.barrier();  // every rank's A is written: the expected gathered A can be assembled

    AgGemmOptions opt = tt::ag_options(mode);
    AgGemmArgs args{dtype, mine.a, mine.b, mine.c, s.m_per_rank, s.n, s.k, mine.gathered};
    tilelink::ag_gemm(ctx, args, opt);
    ctx.synchronize("ag_gemm");

    // Same op, communication disabled: the GEMM over the A this call gathered.
    opt.communicate = false;
    args.c = mine.c2;
    args.a_gathered = nullptr;
    tilelink::ag_gemm(ctx, args, opt);
    ctx.synchronize("ag_gemm (no communication)");

    // Expected gathered A: every rank's A, in rank order (bitwise).
    std::vector<uint8_t> expect;
    for (int q = 0; q < w; ++q) {
      auto part = tt::download(bufs[q].a, s.m_per_rank * s.k * 2, st);
      expect.insert(expect.end(), part.begin(), part.end());
    }
    auto got = tt::download(mine.gathered, m * s.k * 2, st);
    EXPECT_TRUE(tt::bytes_equal(expect.data(), got.data(), expect.size(), "gathered A, " + what + std::to_string(r)));

    tt::reference_gemm(dtype, mine.gathered, mine.b, mine.ref, m, s.n, s.k, st);
    const auto tol = tt::gemm_tolerance(dtype, s.k);
    const auto cmp = tt::compare(dtype, mine.c, s.n, mine.ref, m, s.n, tol.atol, tol.rtol, st);
    EXPECT_EQ(cmp.bad, 0) << what << r << ": " << tt::describe(cmp);
    EXPECT_LT(cmp.rel_fro, tol.rel_fro) << what << r << ": " << tt::describe(cmp);

    auto c1 = tt::download(mine.c, m * s.n * 2, st);
    auto c2 = tt::download(mine.c2, m * s.n * 2, st);
    EXPECT_TRUE(tt::bytes_equal(c1.data(), c2.data(), c1.size(), "C with vs without communication, " + what + std::to_string(r)));
    ctx.barrier();  // peers read this rank's A above
    mine.release();
  });
}

class AgGemm : public tt::WorldSizeTest {};

TEST_P(AgGemm, EveryModeMatchesReference) {
  // reference AG-GEMM shapes scaled to one GPU: N divided by 8 as on 8 ranks, M and K reduced;
  // the last moves >= 4 MiB per rank, where the decomposed path with one GPU per rank splits its
  // GEMM by rank (ops::ag_gemm_split_decomposed).
  const Shape shapes[] = {{256, 1376, 1024}, {512, 1792, 512}, {128, 3584, 2048}, {1024, 1024, 2048}};
  for (const Mode& mode : kModes) {
    for (const Shape& s : shapes) {
      const uint64_t seed = tt::fresh_seed();
      SCOPED_TRACE(tt::seed_trace(seed) + " mode " + mode_name(mode) + " m_per_rank " +
                   std::to_string(s.m_per_rank) + " n " + std::to_string(s.n) + " k " + std::to_string(s.k));
      run_case(world(), s, DType::bf16, mode, seed);
    }
  }
}

TEST_P(AgGemm, OddShapesAndFp16) {
  // The last: odd rows and N, >= 4 MiB moved per rank (the decomposed path splits by rank).
  const Shape shapes[] = {{100, 264, 520}, {1, 8, 8}, {77, 1000, 264}, {1031, 1000, 2056}};
  for (const Mode& mode : kModes) {
    for (const Shape& s : shapes) {
      for (DType dt : {DType::bf16, DType::fp16}) {
        const uint64_t seed = tt::fresh_seed();
        SCOPED_TRACE(tt::seed_trace(seed) + " mode " + mode_name(mode) + " " + tilelink::dtype_name(dt) +
                     " m_per_rank " + std::to_string(s.m_per_rank) + " n " + std::to_string(s.n) +
                     " k " + std::to_string(s.k));
        run_case(world(), s, dt, mode, seed);
      }
    }
  }
}

TEST_P(AgGemm, DecomposedSplitByRankOrWhole) {
  // The decomposed path split by rank (a cuBLAS GEMM per rank's rows beside copy-engine pulls; here
  // on any topology, ranks sharing a GPU too) and whole (the gather, then one GEMM; on a shared GPU
  // the copy engines gather in chunks of chunk_rows rows, the last one shorter here): C must not
  // notice.
  const Shape s{1031, 1000, 2056};
  for (int chunk_rows : {0, 384})
    for (tilelink::RankSplit split : {tilelink::RankSplit::split, tilelink::RankSplit::whole}) {
      const Mode mode{CommMode::pull, CommEngine::sm, tilelink::OpPath::decomposed, chunk_rows, split};
      const uint64_t seed = tt::fresh_seed();
      SCOPED_TRACE(tt::seed_trace(seed) + " mode " + mode_name(mode));
      run_case(world(), s, DType::bf16, mode, seed);
    }
}

// 1,000 back-to-back calls with random shapes and modes, rank 1 starting late; every 50th call is
// checked against the reference (all calls must complete without a timeout and agree in shape).
TEST_P(AgGemm, StressRandomShapesOneRankLate) {
  const int calls = 1000;
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int w = ranks();
  const Shape max_shape{192, 512, 512};
  std::vector<RankBuffers> bufs(w);
  world().run([&](Context& ctx) {
    const int r = ctx.rank();
    cudaStream_t st = ctx.stream();
    RankBuffers& mine = bufs[r];
    mine.alloc(max_shape, w);
    std::mt19937_64 rng(seed);  // same sequence on every rank: the calls agree
    // Allocation may wait for the device: all ranks finish them before any
    // rank's calls (whose kernels wait for the others) start.
    ctx.barrier();
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Shape s{};
    Mode mode{};
    int i = 0;
    // An error here may end every rank's calls; it says which call and seed replay it.
    try {
      for (; i < calls; ++i) {
        s = Shape{int64_t(1 + rng() % max_shape.m_per_rank), int64_t(8 * (1 + rng() % (max_shape.n / 8))),
                int64_t(8 * (1 + rng() % (max_shape.k / 8)))};
        mode = kModes[rng() % tt::kNumAgModes];
        const bool check = i % 50 == 49;
        if (check) {
          tt::fill_uniform(DType::bf16, mine.a, s.m_per_rank * s.k, tt::mix_seed(seed, r, i), 1.0f, st);
          tt::fill_uniform(DType::bf16, mine.b, s.n * s.k, tt::mix_seed(seed, r, i, 1), 1.0f, st);
          tt::poison_nan(DType::bf16, mine.c, s.m_per_rank * w * s.n, st);
        }
        AgGemmOptions opt = tt::ag_options(mode);
        AgGemmArgs args{DType::bf16, mine.a, mine.b, mine.c, s.m_per_rank, s.n, s.k,
                        check ? mine.gathered : nullptr};
        tilelink::ag_gemm(ctx, args, opt);
        if (check) {
          ctx.synchronize("ag_gemm stress");
          const int64_t m = s.m_per_rank * w;
          tt::reference_gemm(DType::bf16, mine.gathered, mine.b, mine.ref, m, s.n, s.k, st);
          const auto tol = tt::gemm_tolerance(DType::bf16, s.k);
          const auto cmp = tt::compare(DType::bf16, mine.c, s.n, mine.ref, m, s.n, tol.atol, tol.rtol, st);
          ASSERT_EQ(cmp.bad, 0) << "call " << i << " rank " << r << " (" << mode_name(mode) << " m_per_rank "
                                << s.m_per_rank << " n " << s.n << " k " << s.k << "): " << tt::describe(cmp);
        }
      }
      ctx.synchronize("ag_gemm stress");
    } catch (const tilelink::Error& e) {
      std::ostringstream os;
      os << e.what() << "\n  (stress call " << i << " on rank " << r << ": " << mode_name(mode) << " m_per_rank "
         << s.m_per_rank << " n " << s.n << " k " << s.k << ", " << tt::seed_trace(seed) << ")";
      throw tilelink::Error(os.str());
    }
    ctx.barrier();
    mine.release();
  });
}

// Bad input is refused on the host, before anything is launched, with a message naming it.
TEST(AgGemmInput, RejectsBadShapesAndAlignment) {
  auto& world = tt::world(2);
  world.run([&](Context& ctx) {
    void* buf = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&buf, 1 << 20));
    AgGemmArgs good{DType::bf16, buf, buf, buf, 16, 64, 64};
    auto expect_error = [&](AgGemmArgs a, const char* needle) {
      try {
        tilelink::ag_gemm(ctx, a);
        ADD_FAILURE() << "no error for " << needle;
      } catch (const tilelink::Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    };
    AgGemmArgs bad = good;
    bad.k = 60;
    expect_error(bad, "k=60");
    bad = good;
    bad.n = 12;
    expect_error(bad, "n=12");
    bad = good;
    bad.a = static_cast<char*>(buf) + 2;
    expect_error(bad, "16-byte aligned");
    bad = good;
    bad.m_per_rank = 0;
    expect_error(bad, "positive");
    // Ranks that disagree on the shape are told so, by name, on every rank.
    AgGemmArgs mismatched = good;
    mismatched.m_per_rank = 16 + 8 * ctx.rank();
    expect_error(mismatched, "m_per_rank differs across ranks");
    TL_CUDA_CHECK(cudaFree(buf));
  });
}

// Calls on the caller's streams, alternating between two with no synchronisation in between:
// each call must still see the previous one finished with the shared workspaces. The results
// must equal, bitwise, the same calls run one at a time on the context's stream.
TEST_P(AgGemm, CallsOnCallerStreams) {
  const int calls = 6;
  const Shape s{384, 1024, 1024};
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int w = ranks();
  world().run([&](Context& ctx) {
    const int r = ctx.rank();
    const int64_t m = s.m_per_rank * w;
    cudaStream_t own = ctx.stream();
    cudaStream_t user[2];
    for (auto& u : user) TL_CUDA_CHECK(cudaStreamCreateWithFlags(&u, cudaStreamNonBlocking));
    void* b = nullptr;
    std::vector<void*> a(calls), serial(calls), streamed(calls);
    TL_CUDA_CHECK(cudaMalloc(&b, s.n * s.k * 2));
    tt::fill_uniform(DType::bf16, b, s.n * s.k, tt::mix_seed(seed, r, 1000), 1.0f, own);
    for (int i = 0; i < calls; ++i) {
      TL_CUDA_CHECK(cudaMalloc(&a[i], s.m_per_rank * s.k * 2));
      TL_CUDA_CHECK(cudaMalloc(&serial[i], m * s.n * 2));
      TL_CUDA_CHECK(cudaMalloc(&streamed[i], m * s.n * 2));
      tt::fill_uniform(DType::bf16, a[i], s.m_per_rank * s.k, tt::mix_seed(seed, r, i), 1.0f, own);
      tt::poison_nan(DType::bf16, serial[i], m * s.n, own);
      tt::poison_nan(DType::bf16, streamed[i], m * s.n, own);
    }
    ctx.synchronize("test data");
    ctx.barrier();
    for (int i = 0; i < calls; ++i) {
      tilelink::ag_gemm(ctx, {DType::bf16, a[i], b, serial[i], s.m_per_rank, s.n, s.k});
      ctx.synchronize("ag_gemm on the context's stream");
    }
    for (int i = 0; i < calls; ++i) {
      AgGemmOptions opt;
      opt.stream = user[i % 2];
      tilelink::ag_gemm(ctx, {DType::bf16, a[i], b, streamed[i], s.m_per_rank, s.n, s.k}, opt);
    }
    for (auto& u : user) TL_CUDA_CHECK(cudaStreamSynchronize(u));
    // A call aborted by a timed-out wait leaves its output unfinished: say so, not "bytes differ".
    ctx.check_faults("ag_gemm on the caller's streams");
    for (int i = 0; i < calls; ++i) {
      const auto want = tt::download(serial[i], m * s.n * 2, own);
      const auto got = tt::download(streamed[i], m * s.n * 2, own);
      EXPECT_TRUE(tt::bytes_equal(want.data(), got.data(), want.size(),
                                  "call " + std::to_string(i) + " on a caller's stream, rank " + std::to_string(r)));
    }
    ctx.barrier();  // peers may still read this rank's A until every rank is done
    for (void* p : a) cudaFree(p);
    for (void* p : serial) cudaFree(p);
    for (void* p : streamed) cudaFree(p);
    cudaFree(b);
    for (auto& u : user) cudaStreamDestroy(u);
  });
}

TILELINK_WORLD_SIZES(AgGemm);

}  // namespace
