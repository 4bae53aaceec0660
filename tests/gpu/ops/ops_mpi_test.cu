// The fused ops across processes: MpiWorld under mpirun, one process per GPU on a multi-GPU
// machine (NVLink, NCCL for the decomposed paths) or two processes sharing one GPU under MPS
// (run_mpi_test.sh). Every mode and variant of ag_gemm, gemm_rs and gemm_ar at the job's world
// size, bf16 and fp16, reference shapes scaled and odd shapes, then a stress loop with one
// rank starting late; allgather_ll; flash_decode; sp_attention; ag_moe and moe_rs; a straggler whose call times
// out, then 100 correct calls.
//
// With TILELINK_ONE_NODE_PER_PROCESS=1 (NVSHMEM transport) the processes reach each other only
// through NVSHMEM put-with-signal, as ranks on different nodes do: ag_gemm and gemm_rs run their
// NVSHMEM paths (every mode they offer there; the others must refuse clearly), the straggler's
// abort travels through NVSHMEM, and the ops without such a path must refuse before launching
// anything.
//
// A process cannot read its peers' inputs, so every rank regenerates all ranks' inputs from the
// shared seed (fill_uniform is a pure function of (seed, index)) and computes the fp32 reference
// itself. Tests use non-fatal EXPECTs so that a failure on one rank cannot leave the others in a
// host barrier (run_mpi_test.sh bounds the whole run in time as well).
#include <gtest/gtest.h>

#include <cuda_bf16.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <utility>
#include <random>
#include <thread>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "gpu/ops/moe_test_data.hpp"
#include "gpu/ops/op_cases.hpp"
#include "gpu/ops/sp_attention_cases.cuh"

namespace tt = tilelink::test;
using tilelink::Context;
using tilelink::DType;
using tilelink::OpPath;

namespace {

Context* g_ctx = nullptr;

// Device allocations of one case, freed at scope exit.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  void* get(size_t bytes) {
    void* p = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&p, bytes));
    ptrs.push_back(p);
    return p;
  }
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
};

std::string shape_name(int64_t m, int64_t n, int64_t k, DType dt) {
  return std::string(tilelink::dtype_name(dt)) + " m " + std::to_string(m) + " n " + std::to_string(n) + " k " +
         std::to_string(k);
}

// Whether the processes reach each other only through NVSHMEM put-with-signal.
bool nvshmem_only(const Context& ctx) { return !ctx.peers_load_store(); }

// What `call` threw ("" if it returned).
std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const tilelink::Error& e) {
    return e.what();
  }
  return "";
}

// ---- ag_gemm -----------------------------------------------------------------------------------
// Rank q's A shard is fill_uniform(seed (q, 1)); each rank's B is its own (seed (rank, 2)).
void ag_gemm_case(Context& ctx, const tt::AgMode& mode, DType dt, int64_t mpr, int64_t n, int64_t k,
                  uint64_t seed) {
  const int r = ctx.rank(), w = ctx.num_ranks();
  const int64_t m = mpr * w;
  const std::string what = tt::mode_name(mode) + " " + shape_name(mpr, n, k, dt) + " rank " + std::to_string(r);
  cudaStream_t st = ctx.stream();
  DeviceBuffers mem;
  void* a = mem.get(mpr * k * 2);
  void* b = mem.get(n * k * 2);
  void* c = mem.get(m * n * 2);
  void* c2 = mem.get(m * n * 2);
  void* gathered = mem.get(m * k * 2);
  void* expect_a = mem.get(m * k * 2);
  auto* ref = static_cast<float*>(mem.get(m * n * 4));
  for (int q = 0; q < w; ++q)
    tt::fill_uniform(dt, static_cast<char*>(expect_a) + q * mpr * k * 2, mpr * k, tt::mix_seed(seed, q, 1), 1.0f, st);
  tt::fill_uniform(dt, a, mpr * k, tt::mix_seed(seed, r, 1), 1.0f, st);
  tt::fill_uniform(dt, b, n * k, tt::mix_seed(seed, r, 2), 1.0f, st);
  for (void* p : {c, c2}) tt::poison_nan(dt, p, m * n, st);
  tt::poison_nan(dt, gathered, m * k, st);
  ctx.synchronize("test data");
  ctx.barrier();

  tilelink::AgGemmOptions opt = tt::ag_options(mode);
  tilelink::AgGemmArgs args{dt, a, b, c, mpr, n, k, gathered};
  tilelink::ag_gemm(ctx, args, opt);
  ctx.synchronize("ag_gemm");
  opt.communicate = false;  // the same GEMM over the A this call gathered
  args.c = c2;
  args.a_gathered = nullptr;
  tilelink::ag_gemm(ctx, args, opt);
  ctx.synchronize("ag_gemm (no communication)");

  const auto want = tt::download(expect_a, m * k * 2, st), got = tt::download(gathered, m * k * 2, st);
  EXPECT_TRUE(tt::bytes_equal(want.data(), got.data(), want.size(), "gathered A, " + what));
  tt::reference_gemm(dt, expect_a, b, ref, m, n, k, st);
  const auto tol = tt::gemm_tolerance(dt, k);
  const auto cmp = tt::compare(dt, c, n, ref, m, n, tol.atol, tol.rtol, st);
  EXPECT_EQ(cmp.bad, 0) << what << ": " << tt::describe(cmp);
  EXPECT_LT(cmp.rel_fro, tol.rel_fro) << what << ": " << tt::describe(cmp);
  const auto c1 = tt::download(c, m * n * 2, st), c2h = tt::download(c2, m * n * 2, st);
  EXPECT_TRUE(tt::bytes_equal(c1.data(), c2h.data(), c1.size(), "C with vs without communication, " + what));
  ctx.barrier();
}

// Over NVSHMEM put-with-signal only, ag_gemm's fused path pushes on SMs, and its decomposed path
// is NCCL's all-gather (a GPU per rank); the automatic choice picks one of those.
bool ag_mode_runs(const Context& ctx, const tt::AgMode& m) {
  if (!nvshmem_only(ctx) || ctx.num_ranks() == 1 || m.path == OpPath::automatic) return true;
  if (m.split == tilelink::RankSplit::split) return false;  // copy-engine moves between load/store peers
  if (m.path == OpPath::decomposed) return ctx.max_ranks_per_gpu() == 1;
  return m.mode == tilelink::CommMode::push && m.engine == tilelink::CommEngine::sm;
}

TEST(OpsMpi, AgGemmEveryModeMatchesReference) {
  Context& ctx = *g_ctx;
  struct S {
    int64_t mpr, n, k;
  };
  const S shapes[] = {{512, 1376, 1024}, {256, 3584, 2048}, {100, 264, 520}, {1, 8, 8}, {1031, 1000, 2056}};
  for (const auto& mode : tt::kAgModes) {
    if (!ag_mode_runs(ctx, mode)) {
      DeviceBuffers mem;
      void* x = mem.get(64 * 64 * 2);
      const std::string error =
          error_of([&] { tilelink::ag_gemm(ctx, {DType::bf16, x, x, x, 8, 8, 8}, tt::ag_options(mode)); });
      EXPECT_NE(error.find("put-with-signal"), std::string::npos)
          << tt::mode_name(mode) << " ran (or failed otherwise) over NVSHMEM put-with-signal: " << error;
      ctx.barrier();
      continue;
    }
    for (const S& s : shapes)
      for (DType dt : {DType::bf16, DType::fp16}) {
        const uint64_t seed = tt::shared_fresh_seed(ctx);
        SCOPED_TRACE(tt::seed_trace(seed));
        ag_gemm_case(ctx, mode, dt, s.mpr, s.n, s.k, seed);
      }
  }
}

// ---- gemm_rs / gemm_ar ---------------------------------------------------------------------------
// Rank q's A is fill_uniform(seed (q, 1)), its B fill_uniform(seed (q, 2)); the reference is
// Σ_q A_q·B_qᵀ over the stacked inputs.
void reduce_case(Context& ctx, const tt::ReduceVariant& v, DType dt, int64_t m, int64_t n, int64_t k,
                 uint64_t seed) {
  const int r = ctx.rank(), w = ctx.num_ranks();
  const std::string what = v.name() + " " + shape_name(m, n, k, dt) + " rank " + std::to_string(r);
  cudaStream_t st = ctx.stream();
  DeviceBuffers mem;
  void* all_a = mem.get(w * m * k * 2);
  void* all_b = mem.get(w * n * k * 2);
  void* c = mem.get(m * n * 2);
  auto* ref = static_cast<float*>(mem.get(m * n * 4));
  for (int q = 0; q < w; ++q) {
    tt::fill_uniform(dt, static_cast<char*>(all_a) + q * m * k * 2, m * k, tt::mix_seed(seed, q, 1), 1.0f, st);
    tt::fill_uniform(dt, static_cast<char*>(all_b) + q * n * k * 2, n * k, tt::mix_seed(seed, q, 2), 1.0f, st);
  }
  const void* a = static_cast<char*>(all_a) + r * m * k * 2;
  const void* b = static_cast<char*>(all_b) + r * n * k * 2;
  tt::poison_nan(dt, c, m * n, st);
  ctx.synchronize("test data");
  ctx.barrier();
  tt::call_reduce(ctx, v, dt, a, b, c, m, n, k);
  ctx.synchronize(v.all_reduce ? "gemm_ar" : "gemm_rs");

  tt::reference_gemm(dt, all_a, all_b, ref, m, n, k, st, w, m * k, n * k);
  const int64_t rows = v.all_reduce ? m : m / w;
  const float* ref_rows = ref + (v.all_reduce ? 0 : int64_t(r) * rows * n);
  const auto tol = tt::reduce_tolerance(dt, k, w, v.rounds_per_hop());
  const auto cmp = tt::compare(dt, c, n, ref_rows, rows, n, tol.atol, tol.rtol, st);
  EXPECT_EQ(cmp.bad, 0) << what << ": " << tt::describe(cmp);
  EXPECT_LT(cmp.rel_fro, tol.rel_fro) << what << ": " << tt::describe(cmp);
  ctx.barrier();
}

// Over NVSHMEM put-with-signal only, gemm_rs runs as the full-mesh push and gemm_ar as the two-shot
// push (which the automatic schedules pick there); the other schedules refuse.
bool reduce_variant_runs(const Context& ctx, const tt::ReduceVariant& v) {
  if (!nvshmem_only(ctx) || ctx.num_ranks() == 1) return true;
  if (v.split == tilelink::RankSplit::split) return false;  // copy-engine moves between load/store peers
  if (v.all_reduce) return v.ar_algo == tilelink::ArAlgo::automatic || v.ar_algo == tilelink::ArAlgo::two_shot;
  return v.rs_algo == tilelink::RsAlgo::automatic ||
         (v.rs_algo == tilelink::RsAlgo::full_mesh && v.mode == tilelink::CommMode::push);
}

// The variants of all_reduce_variants() that run in this world, plus, over NVSHMEM, the decomposed
// paths of the schedules that run there (the same kernels after the GEMM, or NCCL).
std::vector<tt::ReduceVariant> runnable_reduce_variants(const Context& ctx) {
  std::vector<tt::ReduceVariant> out;
  for (const auto& v : tt::all_reduce_variants())
    if (reduce_variant_runs(ctx, v)) out.push_back(v);
  if (nvshmem_only(ctx)) {
    out.push_back({false, tilelink::RsAlgo::full_mesh, tilelink::CommMode::push, tilelink::ArAlgo::automatic,
                   tilelink::ReducePath::decomposed});
    out.push_back({true, tilelink::RsAlgo::ring, tilelink::CommMode::pull, tilelink::ArAlgo::two_shot,
                   tilelink::ReducePath::decomposed});
  }
  return out;
}

TEST(OpsMpi, ReduceOpsEveryVariantMatchesReference) {
  Context& ctx = *g_ctx;
  const int64_t w = ctx.num_ranks();
  struct S {
    int64_t m, n, k;
  };
  // reference GEMM-RS shapes scaled (K/8 as on 8 ranks), then rows that straddle tiles, decode M;
  // every M a multiple of the world size (one rank per process, any number of them).
  const S shapes[] = {{512 * w, 4096, 1376}, {104 * w, 264, 520}, {w, 1024, 256}};
  for (const auto& v : tt::all_reduce_variants()) {  // those that cannot run here refuse, saying why
    if (reduce_variant_runs(ctx, v)) continue;
    DeviceBuffers mem;
    void* x = mem.get(64 * 64 * 2);
    const std::string error = error_of([&] { tt::call_reduce(ctx, v, DType::bf16, x, x, x, 8 * w, 8, 8); });
    EXPECT_NE(error.find("put-with-signal"), std::string::npos)
        << v.name() << " ran (or failed otherwise) over NVSHMEM put-with-signal: " << error;
    ctx.barrier();
  }
  for (const auto& v : runnable_reduce_variants(ctx))
    for (const S& s : shapes)
      for (DType dt : {DType::bf16, DType::fp16}) {
        const uint64_t seed = tt::shared_fresh_seed(ctx);
        SCOPED_TRACE(tt::seed_trace(seed));
        reduce_case(ctx, v, dt, s.m, s.n, s.k, seed);
      }
}

// The all-reduce takes any M: two_shot splits rows the world size does not divide unevenly (over
// NVSHMEM too, where blocks of fewer rows land in slots of the largest block's size).
TEST(OpsMpi, AllReduceAnyM) {
  Context& ctx = *g_ctx;
  for (auto algo : {tilelink::ArAlgo::one_shot, tilelink::ArAlgo::two_shot})
    for (int64_t m : {int64_t(1), int64_t(129), int64_t(16 * ctx.num_ranks() + 3)}) {
      const tt::ReduceVariant v{true, tilelink::RsAlgo::ring, tilelink::CommMode::pull, algo,
                                tilelink::ReducePath::fused};
      if (!reduce_variant_runs(ctx, v)) continue;  // refused: ReduceOpsEveryVariantMatchesReference
      const uint64_t seed = tt::shared_fresh_seed(ctx);
      SCOPED_TRACE(tt::seed_trace(seed));
      reduce_case(ctx, v, DType::bf16, m, 512, 256, seed);
    }
}

// ---- stress --------------------------------------------------------------------------------------
// 300 back-to-back calls of random ops, modes and shapes (those that run in this world), rank 1
// starting 300 ms late; every 25th call is checked. All must complete without a timeout (the
// buffers and signals are handed over between calls with no reset).
TEST(OpsMpi, StressRandomOpsOneRankLate) {
  Context& ctx = *g_ctx;
  const int r = ctx.rank(), w = ctx.num_ranks();
  const uint64_t seed = tt::shared_fresh_seed(ctx);
  SCOPED_TRACE(tt::seed_trace(seed));
  std::mt19937_64 rng(seed);  // same sequence on every rank: the calls agree
  const auto variants = runnable_reduce_variants(ctx);
  std::vector<tt::AgMode> ag_modes;
  for (const auto& m : tt::kAgModes)
    if (ag_mode_runs(ctx, m)) ag_modes.push_back(m);
  DeviceBuffers mem;
  const int64_t kMax = 512;
  void* a = mem.get(kMax * w * kMax * 2);
  void* b = mem.get(kMax * kMax * 2);
  void* c = mem.get(kMax * w * kMax * 2);
  tt::fill_uniform(DType::bf16, a, kMax * w * kMax, tt::mix_seed(seed, r, 1), 1.0f, ctx.stream());
  tt::fill_uniform(DType::bf16, b, kMax * kMax, tt::mix_seed(seed, r, 2), 1.0f, ctx.stream());
  ctx.synchronize("stress data");
  if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int i = 0; i < 300; ++i) {
    const int kAg = int(ag_modes.size());  // kinds [0, kAg): ag_gemm modes; then the reduce variants
    const int kind = int(rng() % (variants.size() + kAg));
    const int64_t n = 8 * (1 + rng() % 64), k = 8 * (1 + rng() % 64);
    if (i % 25 == 24) {  // a checked call: fresh data, full reference
      ctx.synchronize("stress");
      const int64_t rows = 1 + rng() % (kind < kAg ? 192 : 64);
      const uint64_t case_seed = rng();
      if (kind < kAg) ag_gemm_case(ctx, ag_modes[kind], DType::bf16, rows, n, k, case_seed);
      else reduce_case(ctx, variants[kind - kAg], DType::bf16, w * rows, n, k, case_seed);
      continue;
    }
    if (kind < kAg) {
      tilelink::ag_gemm(ctx, {DType::bf16, a, b, c, int64_t(1 + rng() % 192), n, k}, tt::ag_options(ag_modes[kind]));
    } else {
      tt::call_reduce(ctx, variants[kind - kAg], DType::bf16, a, b, c, w * int64_t(1 + rng() % 64), n, k);
    }
  }
  ctx.synchronize("stress");
  ctx.barrier();
}

// ---- allgather_ll ---------------------------------------------------------------------------------
TEST(OpsMpi, AllgatherLlEveryRanksBytesLandBitwise) {
  Context& ctx = *g_ctx;
  const int r = ctx.rank(), w = ctx.num_ranks();
  const uint64_t seed = tt::shared_fresh_seed(ctx);
  SCOPED_TRACE(tt::seed_trace(seed));
  DeviceBuffers mem;
  const int64_t max_bytes = 1 << 20;
  void* in = mem.get(max_bytes);
  void* out = mem.get(max_bytes * w);
  uint64_t call = 0;
  for (int64_t bytes : {int64_t(8), int64_t(4096), int64_t(65528), max_bytes})
    for (int rep = 0; rep < 3; ++rep, ++call) {
      tt::fill_random_device(in, size_t(bytes), tt::mix_seed(seed, r, call), ctx.stream());
      tt::poison_device(out, size_t(bytes * w), 0xa5, ctx.stream());
      tilelink::allgather_ll(ctx, {in, out, bytes});
      ctx.synchronize("allgather_ll");
      std::vector<uint8_t> want;
      for (int q = 0; q < w; ++q) {
        const auto part = tt::random_bytes(size_t(bytes), tt::mix_seed(seed, q, call));
        want.insert(want.end(), part.begin(), part.end());
      }
      const auto got = tt::download(out, size_t(bytes * w), ctx.stream());
      EXPECT_TRUE(tt::bytes_equal(want.data(), got.data(), got.size(), "allgather_ll " + std::to_string(bytes) + " bytes"));
    }
  ctx.barrier();
}

// ---- flash_decode ---------------------------------------------------------------------------------
// Every rank rebuilds every rank's cache shard from the shared seed (host generator) and computes
// the float64 reference over all of them.
TEST(OpsMpi, FlashDecodeMatchesAFloat64Reference) {
  Context& ctx = *g_ctx;
  const int r = ctx.rank(), w = ctx.num_ranks();
  const uint64_t seed = tt::shared_fresh_seed(ctx);
  SCOPED_TRACE(tt::seed_trace(seed));
  const int64_t batch = 2, hq = 8, hkv = 2, d = 128, g = hq / hkv;
  auto len_of = [](int q) { return int64_t(300 + 97 * q); };
  auto values = [](size_t n, uint64_t s) {
    std::mt19937_64 rng(s);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<__nv_bfloat16> out(n);
    for (auto& x : out) x = __float2bfloat16(u(rng));
    return out;
  };
  const auto q = values(size_t(batch * hq * d), tt::mix_seed(seed, 0, 0));
  std::vector<std::vector<__nv_bfloat16>> k(w), v(w);
  for (int p = 0; p < w; ++p) {
    k[p] = values(size_t(batch * len_of(p) * hkv * d), tt::mix_seed(seed, p, 1));
    v[p] = values(size_t(batch * len_of(p) * hkv * d), tt::mix_seed(seed, p, 2));
  }
  DeviceBuffers mem;
  void* dq = mem.get(q.size() * 2);
  void* dk = mem.get(k[r].size() * 2);
  void* dv = mem.get(v[r].size() * 2);
  void* dout = mem.get(q.size() * 2);
  tt::upload(dq, q.data(), q.size() * 2, ctx.stream());
  tt::upload(dk, k[r].data(), k[r].size() * 2, ctx.stream());
  tt::upload(dv, v[r].data(), v[r].size() * 2, ctx.stream());
  tt::poison_device(dout, q.size() * 2, 0xff, ctx.stream());
  tilelink::flash_decode(ctx, {DType::bf16, dq, dk, dv, dout, batch, hq, hkv, d, len_of(r)});
  ctx.synchronize("flash_decode");
  const auto got = tt::download_n(static_cast<const __nv_bfloat16*>(dout), q.size(), ctx.stream());
  int bad = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      std::vector<double> s;
      std::vector<const __nv_bfloat16*> rows;
      for (int p = 0; p < w; ++p)
        for (int64_t t = 0; t < len_of(p); ++t) {
          const int64_t row = ((b * len_of(p) + t) * hkv + h / g) * d;
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += double(__bfloat162float(q[(b * hq + h) * d + e])) * __bfloat162float(k[p][row + e]);
          s.push_back(dot / std::sqrt(double(d)));
          rows.push_back(v[p].data() + row);
        }
      double mx = -INFINITY, sum = 0;
      for (double x : s) mx = std::max(mx, x);
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t e = 0; e < d; ++e) {
        double o = 0;
        for (size_t i = 0; i < s.size(); ++i) o += s[i] * __bfloat162float(rows[i][e]);
        o /= sum;
        const double x = __bfloat162float(got[(b * hq + h) * d + e]);
        if (!(std::fabs(x - o) <= 4e-3 + 8e-3 * std::fabs(o))) ++bad;
      }
    }
  EXPECT_EQ(bad, 0) << bad << " of " << q.size() << " outputs off";
  ctx.barrier();
}

// ---- sp_attention ---------------------------------------------------------------------------------
TEST(OpsMpi, SpAttentionMatchesAttentionOverTheWholeSequence) {
  namespace sp = tilelink::test::sp;
  const uint64_t seed = tt::shared_fresh_seed(*g_ctx);
  SCOPED_TRACE(tt::seed_trace(seed));
  const std::vector<sp::SpCase> cases = {
      {DType::bf16, 2, 90, 4, 2, 128, true, tilelink::SequenceSharding::zigzag, tilelink::OpPath::fused,
       tilelink::CommEngine::copy_engine},
      {DType::fp16, 1, 77, 2, 1, 64, true, tilelink::SequenceSharding::contiguous, tilelink::OpPath::fused,
       tilelink::CommEngine::sm},
      {DType::bf16, 1, 200, 8, 8, 128, false, tilelink::SequenceSharding::contiguous, tilelink::OpPath::decomposed,
       tilelink::CommEngine::copy_engine},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci)
    for (int call = 0; call < 2; ++call) {
      SCOPED_TRACE(sp::describe(cases[ci]) + ", call " + std::to_string(call));
      const sp::RankResult r = sp::run_rank(*g_ctx, cases[ci], tt::mix_seed(seed, ci, call));
      EXPECT_EQ(r.out.bad, 0) << "rank " << g_ctx->rank() << ": " << tt::describe(r.out);
      EXPECT_EQ(r.lse_bad, 0) << "rank " << g_ctx->rank() << ": lse entries off";
    }
}

// ---- mixture of experts ------------------------------------------------------------------------
// ag_moe then moe_rs, fused (and decomposed with one GPU per process), against float64 references
// built from every rank's inputs, regenerated from the shared seed.
TEST(OpsMpi, MoeOpsMatchAFloat64Reference) {
  namespace moe = tilelink::test::moe;
  Context& ctx = *g_ctx;
  const int r = ctx.rank(), w = ctx.num_ranks();
  const uint64_t seed = tt::shared_fresh_seed(ctx);
  SCOPED_TRACE(tt::seed_trace(seed));
  const DType dt = DType::bf16;
  const int64_t m = 20, hidden = 128, inter = 64, tokens = m * w;
  const int32_t experts = 6, topk = 2;
  const int64_t entries = tokens * topk;
  const auto ids = moe::route(moe::Routing::zipf, experts, topk, tokens, tt::mix_seed(seed, 0, 9));
  std::vector<float> weights(static_cast<size_t>(entries));
  for (int64_t i = 0; i < entries; ++i) weights[size_t(i)] = 0.1f + 0.2f * float(i % 5);
  auto x_of = [&](int q) { return moe::random_values(dt, size_t(m * hidden), tt::mix_seed(seed, q, 1)); };
  auto w1_of = [&](int q) { return moe::random_values(dt, size_t(experts * inter * hidden), tt::mix_seed(seed, q, 2)); };
  auto h_of = [&](int q) { return moe::random_values(dt, size_t(entries * inter), tt::mix_seed(seed, q, 3)); };
  auto w2_of = [&](int q) { return moe::random_values(dt, size_t(experts * hidden * inter), tt::mix_seed(seed, q, 4)); };
  std::vector<uint16_t> xs;
  for (int q = 0; q < w; ++q) {
    const auto x = x_of(q);
    xs.insert(xs.end(), x.begin(), x.end());
  }
  const auto w1 = w1_of(r);
  auto dot = [&](const uint16_t* a, const uint16_t* b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += moe::from_bits(dt, a[i]) * moe::from_bits(dt, b[i]);
    return s;
  };
  // moe_rs's reference: this rank's tokens, summed over every rank's slices.
  std::vector<double> rs_ref(size_t(m * hidden), 0.0);
  for (int q = 0; q < w; ++q) {
    const auto h = h_of(q), w2 = w2_of(q);
    for (int64_t t = r * m; t < (r + 1) * m; ++t)
      for (int j = 0; j < topk; ++j) {
        const int64_t i = t * topk + j;
        for (int64_t col = 0; col < hidden; ++col)
          rs_ref[size_t((t - r * m) * hidden + col)] +=
              weights[size_t(i)] * dot(h.data() + i * inter, w2.data() + (ids[size_t(i)] * hidden + col) * inter, inter);
      }
  }
  int gpus = 0;
  TL_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  std::vector<tilelink::OpPath> paths = {tilelink::OpPath::fused};
  if (w > 1 && ctx.max_ranks_per_gpu() == 1) paths.push_back(tilelink::OpPath::decomposed);
  for (const tilelink::OpPath path : paths) {
    const std::string what = std::string(tilelink::op_path_name(path)) + ", rank " + std::to_string(r);
    DeviceBuffers mem;
    void* dx = mem.get(size_t(m * hidden * 2));
    void* dw1 = mem.get(w1.size() * 2);
    void* dy = mem.get(size_t(entries * inter * 2));
    void* dh = mem.get(size_t(entries * inter * 2));
    void* dw2 = mem.get(size_t(experts * hidden * inter * 2));
    void* dout = mem.get(size_t(m * hidden * 2));
    auto* dids = static_cast<int32_t*>(mem.get(ids.size() * 4));
    auto* dwts = static_cast<float*>(mem.get(weights.size() * 4));
    const auto x = x_of(r), h = h_of(r), w2 = w2_of(r);
    tt::upload(dx, x.data(), x.size() * 2, ctx.stream());
    tt::upload(dw1, w1.data(), w1.size() * 2, ctx.stream());
    tt::upload(dh, h.data(), h.size() * 2, ctx.stream());
    tt::upload(dw2, w2.data(), w2.size() * 2, ctx.stream());
    tt::upload(dids, ids.data(), ids.size() * 4, ctx.stream());
    tt::upload(dwts, weights.data(), weights.size() * 4, ctx.stream());
    tt::poison_device(dy, size_t(entries * inter * 2), 0xff, ctx.stream());
    tt::poison_device(dout, size_t(m * hidden * 2), 0xff, ctx.stream());
    tilelink::AgMoeOptions ao;
    ao.path = path;
    tilelink::ag_moe(ctx, {dt, dx, dids, dw1, dy, m, hidden, inter, experts, topk}, ao);
    tilelink::MoeRsOptions ro;
    ro.path = path;
    tilelink::moe_rs(ctx, {dt, dh, dids, dwts, dw2, dout, tokens, hidden, inter, experts, topk}, ro);
    ctx.synchronize("ag_moe, moe_rs");
    const auto y = tt::download(dy, size_t(entries * inter * 2), ctx.stream());
    const auto out = tt::download(dout, size_t(m * hidden * 2), ctx.stream());
    int64_t bad_y = 0, bad_out = 0;
    for (int64_t i = 0; i < entries; ++i)
      for (int64_t col = 0; col < inter; ++col) {
        const double want = dot(xs.data() + (i / topk) * hidden, w1.data() + (ids[size_t(i)] * inter + col) * hidden, hidden);
        const double got = moe::from_bits(dt, reinterpret_cast<const uint16_t*>(y.data())[i * inter + col]);
        if (!(std::fabs(got - want) <= 2e-2 + 8e-3 * std::fabs(want))) ++bad_y;
      }
    for (int64_t i = 0; i < m * hidden; ++i) {
      const double got = moe::from_bits(dt, reinterpret_cast<const uint16_t*>(out.data())[i]);
      const double want = rs_ref[size_t(i)];
      if (!(std::fabs(got - want) <= 0.1 * std::sqrt(double(w * topk)) + 2e-2 * std::fabs(want))) ++bad_out;
    }
    EXPECT_EQ(bad_y, 0) << "ag_moe " << what << ": " << bad_y << " of " << entries * inter << " outputs off";
    EXPECT_EQ(bad_out, 0) << "moe_rs " << what << ": " << bad_out << " of " << m * hidden << " outputs off";
    ctx.barrier();
  }
}

// ---- a fault the world survives -------------------------------------------------------------------
// Every rank but 0 makes its call 2 s late, while rank 0's waits are bounded at 300 ms: rank 0's
// fused ag_gemm times out and aborts the call on every rank. Every rank must raise an error for
// it (rank 0 naming its wait; the others naming rank 0), then 100 calls must give the C of the
// call before the fault, bitwise.
TEST(OpsMpi, StragglerFailsOnEveryRankThenTheWorldWorks) {
  Context& ctx = *g_ctx;
  const int r = ctx.rank(), w = ctx.num_ranks();
  if (w < 2) GTEST_SKIP() << "needs a peer to wait for";
  const uint64_t seed = tt::shared_fresh_seed(ctx);
  SCOPED_TRACE(tt::seed_trace(seed));
  const int64_t m = 256, n = 512, k = 512;
  const size_t c_bytes = size_t(w * m) * n * 2;
  DeviceBuffers mem;
  void* a = mem.get(m * k * 2);
  void* b = mem.get(n * k * 2);
  void* c = mem.get(c_bytes);
  tt::fill_uniform(DType::bf16, a, m * k, tt::mix_seed(seed, r, 1), 1.0f, ctx.stream());
  tt::fill_uniform(DType::bf16, b, n * k, tt::mix_seed(seed, 0, 2), 1.0f, ctx.stream());
  tilelink::AgGemmOptions o;
  o.path = tilelink::OpPath::fused;
  o.mode = tilelink::CommMode::push;
  o.engine = tilelink::CommEngine::sm;
  auto call = [&] {
    tt::poison_device(c, c_bytes, 0xff, ctx.stream());
    tilelink::ag_gemm(ctx, {DType::bf16, a, b, c, m, n, k}, o);
  };
  call();
  ctx.synchronize("ag_gemm");
  const auto want = tt::download(c, c_bytes, ctx.stream());
  ctx.barrier();
  const uint64_t timeout_before = ctx.wait_timeout_ms();
  ctx.set_wait_timeout_ms(r == 0 ? 300 : 60000);
  if (r != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  std::string error;
  try {
    call();
    ctx.synchronize("ag_gemm");
  } catch (const tilelink::Error& e) {
    error = e.what();
  }
  SCOPED_TRACE("rank " + std::to_string(r) + "'s error:\n" + error);
  EXPECT_NE(error.find("op 'ag_gemm'"), std::string::npos) << "no error for the aborted call";
  if (r == 0) {
    EXPECT_NE(error.find("rank 0: "), std::string::npos);
    EXPECT_NE(error.find("signal slot"), std::string::npos) << "rank 0's error does not name its wait";
  } else {
    EXPECT_NE(error.find("timed out on rank 0"), std::string::npos) << "the error does not name rank 0";
  }
  ctx.barrier();
  ctx.set_wait_timeout_ms(timeout_before);
  int wrong = 0;
  for (int i = 0; i < 100; ++i) {
    call();
    ctx.synchronize("ag_gemm");
    if (tt::download(c, c_bytes, ctx.stream()) != want) ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "calls after the fault gave a wrong C";
  ctx.barrier();
}

}  // namespace

int main(int argc, char** argv) { return tt::run_tests_in_mpi_world(argc, argv, "ops_mpi_test", &g_ctx); }
