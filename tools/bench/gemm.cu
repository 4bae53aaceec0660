// tilelink-bench gemm — the GEMM engine against cuBLAS, interleaved in one process.
//
//   tilelink-bench gemm                 reference shapes, choose_config's plan vs cuBLAS
//   tilelink-bench gemm --sweep         every compiled config x raster x swizzle per shape, the
//                                       best per shape re-measured; prints the table the
//                                       heuristic is fitted to
//   tilelink-bench gemm --with-hooks    cost of world-size-1 signal hooks (eager / deferred)
//   tilelink-bench gemm --sweep-random N   N random shapes (M log-uniform in 1-16384, or in LO-HI
//                                       with --rows LO:HI; N and K multiples of 8 in 256-32768,
//                                       N in LO-HI with --cols LO:HI; --seed S, else a fresh
//                                       seed, printed), then the ratio distribution
// Flags: --shapes ag|rs|decode|all|MxNxK[,MxNxK...]  --samples N (20+, final numbers)  --sweep-samples N
//        --configs a,b,c (only these in --sweep, --divisions, --alone and --orders)
//        --without a,b (the rule may not choose these: what it loses without them)
//        --sets N (input buffer sets, >= 2)  --sm-budget N
//        --csv FILE  --no-check  --lib-only (choose among the fused ops' configs only, in their order)
//        --fused-order (the plain GEMM's configs in the fused ops' tile order)
//        --divisions (every lib config, and every plain config at each work division, too;
//        --max-splits N: separate-sum slices up to N only)
//        --orders (every config at its rule's division in each raster x swizzle 1/2/4, too)
//        --alone (every config as the rule would run it were it the only one allowed, too)
//        --no-overlap (plain launches without programmatic dependent launch)
//        --tune[=N] (the heuristic table runs the tuned plan — the rule's first N configs, 5
//        unless given, at the rule's division and their others, timed on the shape and the
//        fastest kept: what TILELINK_GEMM_TUNE=1 runs — interleaved with the rule's own plan and
//        cuBLAS; --tune-whole: the rule's first N plans only, no other divisions)
//
// Method: each sample is one CUDA-event-timed block of `reps` back-to-back launches (reps makes
// a block >= 0.5 ms; a spin kernel ahead of the first event keeps host launch latency out of it),
// rotating over `sets` input buffer sets so neither side runs from a warm L2
// copy of its own inputs; candidate and cuBLAS samples alternate; the reported time is the
// median per launch; inputs are uniform random in [-1, 1) (never zeros). The engine's output is
// compared against cuBLAS's once per shape and config (a mismatch settled by an independent fp32
// reference). Lines of the sweep's per-config detail
// start with two spaces (grep -v '^  ' leaves the summary).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/interleaved_timer.hpp"
#include "bench/registry.hpp"
#include "bench/shape_sample.hpp"
#include "tilelink/gemm/cublas_gemm.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/gemm/plan_text.hpp"
#include "tilelink/gemm/tuning.hpp"
#include "bench/trivial_signal_hooks.cuh"
#include "tilelink/core/error.hpp"
#include "tilelink/testing/check.hpp"

namespace {

using namespace tilelink::gemm;
using bf16 = __nv_bfloat16;

#define BENCH_CUDA(call)                                                                            \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    TL_REQUIRE(e_ == cudaSuccess, "gemm bench: ", #call, " failed: ", cudaGetErrorString(e_));      \
  } while (0)

struct BenchShape {
  std::string group;
  int64_t M, N, K;
};

std::vector<BenchShape> reference_shapes(const std::string& which) {
  // reference dense TP shapes at 8 ranks: AG-GEMM with N / 8, GEMM-RS with K / 8.
  const std::vector<BenchShape> ag = {{"ag", 8192, 1376, 4096},
                                      {"ag", 8192, 1792, 4096},
                                      {"ag", 8192, 3584, 8192},
                                      {"ag", 8192, 6656, 16384},
                                      {"ag", 8192, 3696, 8192}};
  const std::vector<BenchShape> rs = {{"rs", 8192, 4096, 1376}, {"rs", 8192, 4096, 1792},
                                      {"rs", 8192, 3584, 1792}, {"rs", 8192, 4608, 4608},
                                      {"rs", 8192, 8192, 3584}, {"rs", 8192, 8192, 3696}};
  // Decode-sized GEMM-AR per rank (N 8192, K 28672 / 8): the reference decode set (docs/PERF.md).
  std::vector<BenchShape> decode;
  for (int64_t m : {128, 256, 512, 1024, 2048}) decode.push_back({"decode", m, 8192, 3584});
  if (which == "ag") return ag;
  if (which == "rs") return rs;
  if (which == "decode") return decode;
  if (which == "all" || which.empty()) {
    std::vector<BenchShape> v = ag;
    v.insert(v.end(), rs.begin(), rs.end());
    return v;
  }
  std::vector<BenchShape> v;
  std::stringstream ss(which);
  std::string item;
  while (std::getline(ss, item, ',')) {
    long long m = 0, n = 0, k = 0;
    TL_REQUIRE(std::sscanf(item.c_str(), "%lldx%lldx%lld", &m, &n, &k) == 3, "gemm bench: bad shape '", item,
               "' (want MxNxK)");
    v.push_back({"custom", m, n, k});
  }
  return v;
}

__global__ void fill_uniform(bf16* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + uint64_t(i);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    const float u = float(uint32_t(x) >> 8) * (1.0f / 16777216.0f);
    p[i] = __float2bfloat16_rn(2.0f * u - 1.0f);
  }
}

// out[0]: elements where |d - c| > rtol*|c| + atol; out[1]: max |d - c| (as float bits).
__global__ void compare(const bf16* d, const bf16* c, int64_t n, float rtol, float atol, unsigned long long* bad,
                        unsigned int* maxbits) {
  unsigned long long local = 0;
  float mx = 0.f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float a = __bfloat162float(d[i]), b = __bfloat162float(c[i]);
    const float e = fabsf(a - b);
    if (!(e <= rtol * fabsf(b) + atol)) ++local;
    mx = fmaxf(mx, isfinite(e) ? e : 3.0e38f);
  }
  if (local) atomicAdd(bad, local);
  atomicMax(maxbits, __float_as_uint(mx));
}

struct Buffers {
  int sets = 2;
  int64_t M = 0, N = 0, K = 0;
  std::vector<bf16*> A, B;
  bf16* D = nullptr;
  bf16* Dref = nullptr;
  unsigned long long* bad = nullptr;
  unsigned int* maxbits = nullptr;
  Buffers(const BenchShape& s, int nsets) : sets(nsets), M(s.M), N(s.N), K(s.K) {
    for (int i = 0; i < sets; ++i) {
      bf16 *a = nullptr, *b = nullptr;
      BENCH_CUDA(cudaMalloc(&a, size_t(M * K) * sizeof(bf16)));
      BENCH_CUDA(cudaMalloc(&b, size_t(N * K) * sizeof(bf16)));
      fill_uniform<<<1024, 256>>>(a, M * K, 1000 + 2 * i);
      fill_uniform<<<1024, 256>>>(b, N * K, 1001 + 2 * i);
      A.push_back(a);
      B.push_back(b);
    }
    BENCH_CUDA(cudaMalloc(&D, size_t(M * N) * sizeof(bf16)));
    BENCH_CUDA(cudaMalloc(&Dref, size_t(M * N) * sizeof(bf16)));
    BENCH_CUDA(cudaMalloc(&bad, sizeof(unsigned long long)));
    BENCH_CUDA(cudaMalloc(&maxbits, sizeof(unsigned int)));
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  ~Buffers() {
    for (auto* p : A) cudaFree(p);
    for (auto* p : B) cudaFree(p);
    cudaFree(D);
    cudaFree(Dref);
    cudaFree(bad);
    cudaFree(maxbits);
  }
};

// The baseline is what PyTorch's F.linear runs: cuBLASLt with its heuristic (gemm::CublasGemm).
struct Cublas {
  tilelink::gemm::CublasGemm lt;
  explicit Cublas(cudaStream_t stream) : lt(stream) {}
  void gemm(const bf16* A, const bf16* B, bf16* D, int64_t M, int64_t N, int64_t K) {
    lt.run(tilelink::DType::bf16, A, B, D, M, N, K);
  }
};

// Every compiled bf16/NoHooks kernel, lib and sweep sets.
void launch_any(GemmConfig c, const GemmArgs<bf16>& a, const GemmLaunchOptions& o, cudaStream_t s) {
  switch (c) {
#if defined(TILELINK_GEMM_HAVE_SWEEP)
#define X_CASE(name, ...)                                         \
  case GemmConfig::name:                                          \
    return gemm_launch<bf16, NoHooks, GemmConfig::name>(a, NoHooks{}, o, s);
#else
#define X_CASE_lib(name) \
  case GemmConfig::name: \
    return gemm_launch<bf16, NoHooks, GemmConfig::name>(a, NoHooks{}, o, s);
#define X_CASE_plain(name) X_CASE_lib(name)
#define X_CASE_sweep(name)
#define X_CASE(name, sched, tm, tn, tk, cm, cn, st, en, ops, set) X_CASE_##set(name)
#endif
    TILELINK_GEMM_CONFIGS(X_CASE)
#undef X_CASE
#undef X_CASE_lib
#undef X_CASE_plain
#undef X_CASE_sweep
    default:
      TL_REQUIRE(false, "gemm bench: config #", int(c),
                 " is not built into this binary (sweep set needs tilelink_gemm_sweep)");
  }
}

using tilelink::bench::InterleavedTimer;
using tilelink::bench::Launch;

// The configs named in a comma-separated list (`if_empty` for an empty one); an unknown name is an
// error naming `flag`, not an empty table.
uint64_t named_configs(const std::string& list, const char* flag, uint64_t if_empty) {
  if (list.empty()) return if_empty;
  uint64_t bits = 0;
  std::stringstream names(list);
  for (std::string name; std::getline(names, name, ',');) {
    GemmConfig c{};
    TL_REQUIRE(parse_config(name, &c), "gemm bench: ", flag, ": unknown config '", name, "'");
    bits |= config_bit(c);
  }
  return bits;
}

double tflops(const BenchShape& s, double ms) { return 2.0 * s.M * s.N * s.K / (ms * 1e-3) / 1e12; }

// One row per measured plan; `cublas_algo` is what cuBLASLt ran beside it (CublasGemm::algorithm).
struct Csv {
  FILE* f = nullptr;
  Cublas* cb = nullptr;
  Csv(const std::string& path, Cublas* cublas) : cb(cublas) {
    if (!path.empty()) {
      f = std::fopen(path.c_str(), "w");
      TL_REQUIRE(f != nullptr, "gemm bench: cannot open ", path);
      std::fprintf(f, "mode,group,M,N,K,config,raster,swizzle,ms,tflops,cublas_ms,cublas_tflops,ratio,plan,"
                      "cublas_algo\n");
    }
  }
  ~Csv() {
    if (f) std::fclose(f);
  }
  // `known_algo`: cuBLASLt's algorithm for the shape where the caller has it already.
  void row(const char* mode, const BenchShape& s, const Buffers& b, const GemmPlan& p, double ms, double cms,
           const std::string* known_algo = nullptr) {
    if (!f) return;
    const std::string algo =
        known_algo ? *known_algo : cb->lt.algorithm(tilelink::DType::bf16, b.A[0], b.B[0], b.D, b.M, b.N, b.K);
    std::fprintf(f, "%s,%s,%lld,%lld,%lld,%s,%s,%d,%.5f,%.1f,%.5f,%.1f,%.4f,%s,%s\n", mode, s.group.c_str(),
                 (long long)s.M, (long long)s.N, (long long)s.K, config_name(p.config), raster_name(p.raster),
                 p.swizzle, ms, tflops(s, ms), cms, tflops(s, cms), cms / ms, plan_text(p).c_str(), algo.c_str());
    std::fflush(f);
  }
};

// Elements of `d` off the fp32 reference GEMM of b's first input set (CUDA cores, no cuBLAS),
// at the tests' bf16 tolerance for this K.
int64_t off_reference(const Buffers& b, const bf16* d, const float* ref, cudaStream_t st) {
  const auto tol = tilelink::test::gemm_tolerance(tilelink::DType::bf16, b.K);
  return tilelink::test::compare(tilelink::DType::bf16, d, b.N, ref, b.M, b.N, tol.atol, tol.rtol, st).bad;
}

// Output check against cuBLAS: both accumulate in fp32 and round to bf16 once, so they differ by
// accumulation order: allow 2^-6 relative plus 2^-7 * sqrt(K) / 3 absolute (the result's scale).
// cuBLAS is not always right (it has been wrong on some GEMMs of a few rows and deep K), so a
// mismatch is settled by the independent fp32 reference, and the line says which side is wrong.
std::string check_against_cublas(Buffers& b, Cublas& cb, const std::function<void()>& run, cudaStream_t st) {
  cb.gemm(b.A[0], b.B[0], b.Dref, b.M, b.N, b.K);
  BENCH_CUDA(cudaMemsetAsync(b.D, 0xFF, size_t(b.M * b.N) * sizeof(bf16), st));  // NaN poison
  run();
  BENCH_CUDA(cudaMemsetAsync(b.bad, 0, sizeof(unsigned long long), st));
  BENCH_CUDA(cudaMemsetAsync(b.maxbits, 0, sizeof(unsigned int), st));
  const float atol = float(std::sqrt(double(b.K)) / 3.0 / 128.0);
  compare<<<1024, 256, 0, st>>>(b.D, b.Dref, b.M * b.N, 1.0f / 64.0f, atol, b.bad, b.maxbits);
  BENCH_CUDA(cudaGetLastError());
  unsigned long long bad = 0;
  unsigned int maxbits = 0;
  BENCH_CUDA(cudaMemcpyAsync(&bad, b.bad, sizeof bad, cudaMemcpyDeviceToHost, st));
  BENCH_CUDA(cudaMemcpyAsync(&maxbits, b.maxbits, sizeof maxbits, cudaMemcpyDeviceToHost, st));
  BENCH_CUDA(cudaStreamSynchronize(st));
  float mx;
  std::memcpy(&mx, &maxbits, sizeof mx);
  char buf[192];
  if (!bad) {
    snprintf(buf, sizeof buf, "ok (max |diff| %.3g)", mx);
    return buf;
  }
  float* ref = nullptr;
  BENCH_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&ref), size_t(b.M * b.N) * sizeof(float), st));
  tilelink::test::reference_gemm(tilelink::DType::bf16, b.A[0], b.B[0], ref, b.M, b.N, b.K, st);
  const int64_t engine_off = off_reference(b, b.D, ref, st), cublas_off = off_reference(b, b.Dref, ref, st);
  BENCH_CUDA(cudaFreeAsync(ref, st));
  if (engine_off == 0)
    snprintf(buf, sizeof buf, "ok (cuBLAS wrong: %lld elements off the fp32 reference, which the engine matches)",
             (long long)cublas_off);
  else
    snprintf(buf, sizeof buf, "MISMATCH (%llu elements vs cuBLAS, max |diff| %.3g; vs the fp32 reference: engine %lld off, cuBLAS %lld)",
             bad, mx, (long long)engine_off, (long long)cublas_off);
  return buf;
}

int run_gemm_bench(const tilelink::bench::Args& args) {
  std::vector<BenchShape> shapes;
  uint64_t seed = 0;
  tilelink::bench::SizeRange rows = tilelink::bench::kDefaultRows, cols = tilelink::bench::kDefaultCols;
  const bool random_shapes = args.has("sweep-random");
  if (random_shapes) {
    const std::string fixed = args.get("seed", "");
    seed = fixed.empty() ? (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()
                         : std::stoull(fixed, nullptr, 0);
    if (args.has("rows")) rows = tilelink::bench::parse_size_range(args.get("rows", ""), "--rows");
    if (args.has("cols")) cols = tilelink::bench::parse_size_range(args.get("cols", ""), "--cols");
    for (const auto& d :
         tilelink::bench::random_gemm_shapes(int(args.get_int("sweep-random", 100)), seed, rows, cols))
      shapes.push_back({"rand", d.m, d.n, d.k});
  } else {
    shapes = reference_shapes(args.get("shapes", "all"));
  }
  const int samples = std::max<long>(20, args.get_int("samples", 30));
  const int sweep_samples = std::max<long>(5, args.get_int("sweep-samples", 12));
  const int sets = std::max<long>(2, args.get_int("sets", 2));
  const int budget = int(args.get_int("sm-budget", 0));
  const bool do_check = !args.has("no-check");
  // The plain GEMM chooses among lib + plain; --lib-only: the set the fused ops' kernels have.
  // --without: configs the rule may not choose (what it loses without them, in the same binary).
  const uint64_t without = named_configs(args.get("without", ""), "--without", 0);
  const uint64_t mask = (args.has("lib-only") ? kLibConfigMask : kPlainConfigMask) & ~without;
  // --fused-order: the plain set in the fused ops' tile order (measures the plain order rule).
  const PlanUse use = args.has("lib-only") || args.has("fused-order") ? PlanUse::fused_op : PlanUse::plain;
  // --configs: the configs the per-config tables measure (the rule's own pick still chooses among `mask`).
  const uint64_t named = named_configs(args.get("configs", ""), "--configs", ~uint64_t(0));
  // A config as the rule would run it were it the only one allowed.
  const auto alone = [&](const BenchShape& s, GemmConfig c, PlanUse u) {
    return choose_config(GemmShape{s.M, s.N, s.K}, tilelink::DType::bf16, budget, config_bit(c), u);
  };
  cudaStream_t st;
  BENCH_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  Cublas cb(st);
  Csv csv(args.get("csv", ""), &cb);
  InterleavedTimer timer(st, sets);
  int dev = 0;
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDevice(&dev));
  BENCH_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("gemm bench: %s, %d SMs, sm budget %d, bf16 TN, %d input sets, %d samples (sweep %d)\n", prop.name,
              prop.multiProcessorCount, budget > 0 ? budget : prop.multiProcessorCount, sets, samples,
              sweep_samples);
  if (random_shapes)
    std::printf("%zu random shapes, M in %lld-%lld, N in %lld-%lld, seed 0x%llx (--seed 0x%llx --rows %lld:%lld "
                "--cols %lld:%lld repeats them)\n",
                shapes.size(), (long long)rows.min, (long long)rows.max, (long long)cols.min, (long long)cols.max,
                (unsigned long long)seed, (unsigned long long)seed, (long long)rows.min, (long long)rows.max,
                (long long)cols.min, (long long)cols.max);
  std::fflush(stdout);

  const bool overlap = !args.has("no-overlap");
  auto engine = [&](Buffers& b, const GemmPlan& p) -> Launch {
    return [&b, p, budget, st, overlap](int set) {
      const GemmArgs<bf16> a{b.A[set], b.B[set], b.D, GemmShape{b.M, b.N, b.K}};
      GemmLaunchOptions o = launch_options(p, budget);
      o.overlap_previous = overlap;
      launch_any(p.config, a, o, st);
    };
  };
  auto cublas = [&](Buffers& b) -> Launch {
    return [&b, &cb](int set) { cb.gemm(b.A[set], b.B[set], b.D, b.M, b.N, b.K); };
  };

  // ---- 1. the heuristic's plan vs cuBLAS --------------------------------------------------
  std::printf("\n== choose_config vs cuBLAS (median of %d interleaved samples) ==\n", samples);
  std::printf("%-6s %6s %6s %6s  %-34s %9s %8s %9s %8s %7s  %s  %s\n", "group", "M", "N", "K", "plan", "ms",
              "TFLOP/s", "cublas ms", "TFLOP/s", "ratio", "check", "cuBLASLt's algorithm");
  std::fflush(stdout);
  std::vector<double> ratios, rule_ratios;
  // --tune: the plain GEMM's tuned plan (its rule, so --without / --lib-only do not apply), timed
  // interleaved with the rule's plan and cuBLAS; the line shows the tuned plan, and the rule's
  // ratio beside it.
  const bool tune = args.has("tune");
  GemmTuning tuning;
  if (tune && !args.get("tune", "").empty())
    tuning.candidates = int(std::max<long>(1, args.get_int("tune", tuning.candidates)));
  tuning.divisions = !args.has("tune-whole");
  std::vector<double> tune_ms;  // host time of each shape's tuning
  TL_REQUIRE(!tune || (without == 0 && use == PlanUse::plain),
             "gemm bench: --tune times the plain GEMM's own ranking (no --without, --lib-only or --fused-order)");
  int tuned_changed = 0, tuned_from_graphs = 0;
  for (const auto& s : shapes) {
    Buffers b(s, sets);
    const GemmPlan rule = choose_config(GemmShape{s.M, s.N, s.K}, tilelink::DType::bf16, budget, mask, use);
    GemmPlan p = rule;
    if (tune) {
      const auto t0 = std::chrono::steady_clock::now();
      const GemmTuneResult r = tune_plain_gemm(tilelink::DType::bf16, b.A[0], b.B[0], b.D, GemmShape{s.M, s.N, s.K},
                                               budget, st, tuning);
      tune_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      tuned_changed += r.best != 0;
      tuned_from_graphs += r.from_graphs;
      p = r.plans[size_t(r.best)];
    }
    std::string chk = "skipped";
    if (do_check) chk = check_against_cublas(b, cb, [&] { engine(b, p)(0); }, st);
    std::vector<Launch> launches{engine(b, p), cublas(b)};
    if (tune) launches.push_back(engine(b, rule));
    const auto med = timer.measure(launches, samples);
    ratios.push_back(med[1] / med[0]);
    char rule_col[48] = "";
    if (tune) {
      rule_ratios.push_back(med[1] / med[2]);
      std::snprintf(rule_col, sizeof rule_col, "  (rule %.3f)", med[1] / med[2]);
    }
    const std::string algo = cb.lt.algorithm(tilelink::DType::bf16, b.A[0], b.B[0], b.D, b.M, b.N, b.K);
    std::printf("%-6s %6lld %6lld %6lld  %-34s %9.4f %8.1f %9.4f %8.1f %7.3f%s  %s  %s\n", s.group.c_str(),
                (long long)s.M, (long long)s.N, (long long)s.K, plan_text(p).c_str(), med[0], tflops(s, med[0]),
                med[1], tflops(s, med[1]), med[1] / med[0], rule_col, chk.c_str(), algo.c_str());
    std::fflush(stdout);
    csv.row(tune ? "tuned" : "heuristic", s, b, p, med[0], med[1], &algo);
    if (tune) csv.row("heuristic", s, b, rule, med[2], med[1], &algo);
  }
  const auto print_summary = [](const char* what, const std::vector<double>& r) {
    const auto sum = tilelink::bench::summarize_ratios(r);
    std::printf("%sratio (cuBLAS time / engine time) over %d shapes: geomean %.3f, min %.3f, p10 %.3f, median %.3f, "
                "%d below 0.90\n",
                what, sum.count, sum.geomean, sum.min, sum.p10, sum.median, sum.below_090);
  };
  if (tune) {
    std::sort(tune_ms.begin(), tune_ms.end());
    std::printf("tuned: the rule's first %d configs%s timed per shape (from CUDA graphs on %d); a later plan kept "
                "on %d of %zu shapes; tuning took %.1f ms per shape (median), %.1f ms at most\n",
                tuning.candidates, tuning.divisions ? " and their other divisions" : "", tuned_from_graphs,
                tuned_changed, shapes.size(),
                tune_ms.empty() ? 0.0 : tune_ms[tune_ms.size() / 2], tune_ms.empty() ? 0.0 : tune_ms.back());
    print_summary("the rule's plan, same samples: ", rule_ratios);
    print_summary("tuned ", ratios);
  } else {
    print_summary("", ratios);
  }
  std::fflush(stdout);

  // ---- 2. sweep ----------------------------------------------------------------------------
  if (args.has("sweep")) {
#if !defined(TILELINK_GEMM_HAVE_SWEEP)
    std::printf("\n--sweep: this binary was built without tilelink_gemm_sweep; only `lib` configs are swept\n");
#endif
    std::vector<GemmConfig> cfgs;
    for (int i = 0; i < kNumGemmConfigs; ++i) {
      const GemmConfig c = static_cast<GemmConfig>(i);
#if !defined(TILELINK_GEMM_HAVE_SWEEP)
      if (config_info(c).set != GemmConfigSet::lib) continue;
#endif
      if (named >> i & 1u) cfgs.push_back(c);
    }
    const Raster rasters[] = {Raster::along_n, Raster::along_m};
    const int swizzles[] = {1, 2, 4, 8};
    std::printf("\n== sweep: %zu configs x 2 rasters x 4 swizzles, %d samples each, each paired with cuBLAS ==\n",
                cfgs.size(), sweep_samples);
    std::fflush(stdout);
    double best_log_sum = 0;
    std::vector<std::pair<BenchShape, GemmPlan>> best_plans;
    for (const auto& s : shapes) {
      Buffers b(s, sets);
      struct Row {
        GemmPlan p;
        double ms, cms;
      };
      std::vector<Row> rows;
      for (GemmConfig c : cfgs) {
        std::string chk = do_check ? check_against_cublas(b, cb, [&] { engine(b, GemmPlan{c, Raster::along_n, 1})(0); }, st)
                                   : "skipped";
        std::printf("  %-6s %lldx%lldx%lld %-24s check %s:", s.group.c_str(), (long long)s.M, (long long)s.N,
                    (long long)s.K, config_name(c), chk.c_str());
        for (Raster r : rasters) {
          for (int sw : swizzles) {
            const GemmPlan p{c, r, sw};
            const auto med = timer.measure({engine(b, p), cublas(b)}, sweep_samples);
            rows.push_back({p, med[0], med[1]});
            std::printf(" %s%d=%.3f", r == Raster::along_n ? "n" : "m", sw, med[1] / med[0]);
            csv.row("sweep", s, b, p, med[0], med[1]);
          }
        }
        std::printf("\n");
        std::fflush(stdout);
      }
      std::sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.cms / x.ms > y.cms / y.ms; });
      std::printf("best for %s %lldx%lldx%lld:", s.group.c_str(), (long long)s.M, (long long)s.N, (long long)s.K);
      for (size_t i = 0; i < std::min<size_t>(5, rows.size()); ++i)
        std::printf("  %s %.3f", plan_text(rows[i].p).c_str(), rows[i].cms / rows[i].ms);
      std::printf("\n");
      std::fflush(stdout);
      if (!rows.empty()) best_plans.push_back({s, rows[0].p});
    }
    // Re-measure each shape's winner with the full sample count (the sweep's max is biased up).
    std::printf("\n== sweep winners re-measured (median of %d interleaved samples) ==\n", samples);
    for (const auto& [s, p] : best_plans) {
      Buffers b(s, sets);
      const auto med = timer.measure({engine(b, p), cublas(b)}, samples);
      best_log_sum += std::log(med[1] / med[0]);
      std::printf("%-6s %6lld %6lld %6lld  %-34s %9.4f %8.1f %9.4f %8.1f %7.3f\n", s.group.c_str(), (long long)s.M,
                  (long long)s.N, (long long)s.K, plan_text(p).c_str(), med[0], tflops(s, med[0]), med[1],
                  tflops(s, med[1]), med[1] / med[0]);
      std::fflush(stdout);
      csv.row("sweep-best", s, b, p, med[0], med[1]);
    }
    if (!best_plans.empty())
      std::printf("geomean ratio of the per-shape winners: %.3f\n", std::exp(best_log_sum / double(best_plans.size())));
    std::fflush(stdout);
  }

  // Measures each plan of one shape against cuBLAS (sweep samples), one CSV row each, and prints
  // the line of ratios and the best plan.
  auto measure_plans = [&](const char* mode, const BenchShape& s, Buffers& b, const std::vector<GemmPlan>& plans,
                           const std::string& header) {
    std::printf("  %lldx%lldx%lld%s:", (long long)s.M, (long long)s.N, (long long)s.K, header.c_str());
    double best = 0;
    GemmPlan best_plan{};
    for (const GemmPlan& p : plans) {
      if (do_check) {
        const std::string chk = check_against_cublas(b, cb, [&] { engine(b, p)(0); }, st);
        if (chk.rfind("ok", 0) != 0) std::printf(" [%s %s]", plan_text(p).c_str(), chk.c_str());
      }
      const auto med = timer.measure({engine(b, p), cublas(b)}, sweep_samples);
      const double r = med[1] / med[0];
      std::printf(" %s=%.3f", plan_text(p).c_str(), r);
      csv.row(mode, s, b, p, med[0], med[1]);
      if (r > best) best = r, best_plan = p;
    }
    std::printf("\nbest %s %lldx%lldx%lld: %s %.3f\n", mode, (long long)s.M, (long long)s.N, (long long)s.K,
                plan_text(best_plan).c_str(), best);
    std::fflush(stdout);
  };

  // ---- 2b. work divisions of the plain configs ------------------------------------------------
  // Each `lib` config as the rule runs it alone; each `plain` config, in the tile order the rule
  // runs it in, data-parallel and split 2-32 (--max-splits) ways with a separate sum, and those on
  // the stream-K scheduler chained 2/4/8/16 ways (where K allows >= 256 per slice) and stream-K,
  // against cuBLAS: the table the split rules and the plain priors are fitted to.
  if (args.has("divisions")) {
    // --max-splits: the most slices with a separate sum measured (fewer: a shorter run).
    const int max_splits = int(std::clamp<long>(args.get_int("max-splits", kMaxSplits), 2, kMaxSplits));
    std::printf("\n== work divisions of the plain configs (%d samples each, paired with cuBLAS) ==\n", sweep_samples);
    std::fflush(stdout);
    for (const auto& s : shapes) {
      Buffers b(s, sets);
      std::vector<GemmPlan> plans;
      for (int i = 0; i < kNumGemmConfigs; ++i) {
        const GemmConfig c = static_cast<GemmConfig>(i);
        if (!(named >> i & 1u)) continue;
        // The lib configs as the heuristic would run them alone (its raster and swizzle).
        if (config_info(c).set == GemmConfigSet::lib && (mask >> i & 1u))
          plans.push_back(alone(s, c, use));
        if (config_info(c).set != GemmConfigSet::plain) continue;
        const bool stream_k_scheduler = config_info(c).schedule == GemmSchedule::sk;
        // Every division in the tile order the rule runs the config in (the plain GEMM's own).
        const GemmPlan order = alone(s, c, use);
        const auto division = [&](Decomposition d, int sp) {
          return GemmPlan{c, order.raster, order.swizzle, d, sp};
        };
        plans.push_back(division(Decomposition::data_parallel, 1));
        for (int sp : {2, 4, 8, 16})
          if (stream_k_scheduler && s.K / sp >= 256) plans.push_back(division(Decomposition::split_k, sp));
        for (int sp = 2; sp <= max_splits; ++sp)
          if (s.K / sp >= 256) plans.push_back(division(Decomposition::split_k_reduce, sp));
        if (stream_k_scheduler) plans.push_back(division(Decomposition::stream_k, 1));
      }
      const GemmPlan chosen = choose_config(GemmShape{s.M, s.N, s.K}, tilelink::DType::bf16, budget, mask, use);
      measure_plans("division", s, b, plans, " chosen " + plan_text(chosen));
    }
  }

  // ---- 2b'. every config alone ----------------------------------------------------------------
  // Each allowed config exactly as the rule would run it were it the only one allowed (its best
  // division, the order of the use measured), against cuBLAS: the table the plain GEMM's
  // predicted times are fitted to.
  if (args.has("alone")) {
    std::printf("\n== every config as the rule runs it alone (%d samples each, paired with cuBLAS) ==\n",
                sweep_samples);
    std::fflush(stdout);
    for (const auto& s : shapes) {
      Buffers b(s, sets);
      std::vector<GemmPlan> plans;
      for (int i = 0; i < kNumGemmConfigs; ++i)
        if ((mask & named) >> i & 1u) plans.push_back(alone(s, static_cast<GemmConfig>(i), use));
      const GemmPlan chosen = choose_config(GemmShape{s.M, s.N, s.K}, tilelink::DType::bf16, budget, mask, use);
      measure_plans("alone", s, b, plans, " chosen " + plan_text(chosen));
    }
  }

  // ---- 2c. tile orders ------------------------------------------------------------------------
  // Every allowed config at the work division the rule gives it alone, in each raster and
  // swizzle (1, 2, 4), against cuBLAS: the table the tile-order rule is fitted to.
  if (args.has("orders")) {
    std::printf("\n== tile orders of every config (%d samples each, paired with cuBLAS) ==\n", sweep_samples);
    std::fflush(stdout);
    for (const auto& s : shapes) {
      Buffers b(s, sets);
      std::vector<GemmPlan> plans;
      for (int i = 0; i < kNumGemmConfigs; ++i) {
        if (!((mask & named) >> i & 1u)) continue;
        const GemmPlan base = alone(s, static_cast<GemmConfig>(i), PlanUse::fused_op);
        for (Raster r : {Raster::along_n, Raster::along_m})
          for (int sw : {1, 2, 4}) {
            GemmPlan p = base;
            p.raster = r;
            p.swizzle = sw;
            plans.push_back(p);
          }
      }
      measure_plans("order", s, b, plans, "");
    }
  }

  // ---- 3. hook overhead ----------------------------------------------------------------------
  if (args.has("with-hooks")) {
#if defined(TILELINK_GEMM_HAVE_SWEEP)
    const GemmConfig hooked[] = {GemmConfig::coop_128x256_c2x1, GemmConfig::pp_128x128_c2x1};
    std::printf("\n== hook cost at world size 1 (trivially satisfied waits, release-add notifies, rotated M) ==\n");
    std::printf("%-6s %6s %6s %6s  %-20s %9s %9s %9s %8s %8s\n", "group", "M", "N", "K", "config", "none ms",
                "eager ms", "defer ms", "eager", "deferred");
    std::fflush(stdout);
    uint64_t* flags = nullptr;
    const size_t flag_count = size_t(1) << 20;
    BENCH_CUDA(cudaMalloc(&flags, flag_count * sizeof(uint64_t)));
    BENCH_CUDA(cudaMemset(flags, 0, flag_count * sizeof(uint64_t)));
    const uint64_t one = 1;
    BENCH_CUDA(cudaMemcpy(flags, &one, sizeof one, cudaMemcpyHostToDevice));
    for (const auto& s : shapes) {
      Buffers b(s, sets);
      const GemmPlan base = choose_config(GemmShape{s.M, s.N, s.K}, tilelink::DType::bf16, budget);
      for (GemmConfig c : hooked) {
        const GemmConfigInfo& ci = config_info(c);
        const int64_t tiles_n = (s.N + ci.tile_n - 1) / ci.tile_n;
        const int64_t tiles_m = (s.M + ci.tile_m * ci.cluster_m - 1) / (ci.tile_m * ci.cluster_m) * ci.cluster_m;
        TL_REQUIRE(size_t(tiles_m * tiles_n) + 1 <= flag_count, "gemm bench: too many tiles for the flag buffer");
        const GemmLaunchOptions o{budget, base.raster, base.swizzle};
        auto make_hooks = [&](auto h) {
          h.ready = flags;
          h.tile_flags = flags + 1;
          h.tiles_n = int32_t(tiles_n);
          h.first_unit = int32_t(tiles_m / ci.cluster_m / 3);
          return h;
        };
        const TrivialSignalHooksEager he = make_hooks(TrivialSignalHooksEager{});
        const TrivialSignalHooksDeferred hd = make_hooks(TrivialSignalHooksDeferred{});
        auto args_for = [&b](int set) { return GemmArgs<bf16>{b.A[set], b.B[set], b.D, GemmShape{b.M, b.N, b.K}}; };
        Launch none = [&, c, o](int set) { launch_any(c, args_for(set), o, st); };
        Launch eager, deferred;
        if (c == GemmConfig::coop_128x256_c2x1) {
          eager = [&, o, he](int set) {
            gemm_launch<bf16, TrivialSignalHooksEager, GemmConfig::coop_128x256_c2x1>(args_for(set), he, o, st);
          };
          deferred = [&, o, hd](int set) {
            gemm_launch<bf16, TrivialSignalHooksDeferred, GemmConfig::coop_128x256_c2x1>(args_for(set), hd, o, st);
          };
        } else {
          eager = [&, o, he](int set) {
            gemm_launch<bf16, TrivialSignalHooksEager, GemmConfig::pp_128x128_c2x1>(args_for(set), he, o, st);
          };
          deferred = [&, o, hd](int set) {
            gemm_launch<bf16, TrivialSignalHooksDeferred, GemmConfig::pp_128x128_c2x1>(args_for(set), hd, o, st);
          };
        }
        std::string chk = "";
        if (do_check) chk = check_against_cublas(b, cb, [&] { eager(0); }, st) + " / " +
                            check_against_cublas(b, cb, [&] { deferred(0); }, st);
        const auto med = timer.measure({none, eager, deferred}, samples);
        std::printf("%-6s %6lld %6lld %6lld  %-20s %9.4f %9.4f %9.4f %+7.2f%% %+7.2f%%  %s\n", s.group.c_str(),
                    (long long)s.M, (long long)s.N, (long long)s.K, config_name(c), med[0], med[1], med[2],
                    100.0 * (med[1] / med[0] - 1.0), 100.0 * (med[2] / med[0] - 1.0), chk.c_str());
        std::fflush(stdout);
      }
    }
    cudaFree(flags);
#else
    std::printf("\n--with-hooks: this binary was built without tilelink_gemm_sweep\n");
#endif
  }
  BENCH_CUDA(cudaStreamSynchronize(st));
  BENCH_CUDA(cudaStreamDestroy(st));
  return 0;
}

}  // namespace

TILELINK_BENCH_COMMAND(gemm, "GEMM engine vs cuBLAS (bf16, reference shapes); --sweep, --sweep-random N, --with-hooks",
                       run_gemm_bench);
