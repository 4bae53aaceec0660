// Host side of the GEMM engine: validation, the config heuristic, the run-time-dtype entry point.
#include "tilelink/gemm/gemm.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "tilelink/gemm/hooks.cuh"
#include "tilelink/core/error.hpp"

namespace tilelink::gemm {

bool parse_config(const std::string& name, GemmConfig* out) {
  for (int i = 0; i < kNumGemmConfigs; ++i) {
    if (name == kGemmConfigInfo[i].name) {
      *out = static_cast<GemmConfig>(i);
      return true;
    }
  }
  return false;
}

const char* raster_name(Raster r) {
  switch (r) {
    case Raster::along_m: return "along_m";
    case Raster::along_n: return "along_n";
    default: return "heuristic";
  }
}

void fail_config_not_in_set(GemmConfig c, const char* what) {
  const int i = static_cast<int>(c);
  if (i < 0 || i >= kNumGemmConfigs) ::tilelink::detail::fail("gemm: invalid config id ", i, " in ", what);
  ::tilelink::detail::fail("gemm: config ", kGemmConfigInfo[i].name, " is not in the library set; ", what);
}

void validate(const GemmShape& shape, const void* A, const void* B, const void* D, const char* who) {
  const GemmShape s = packed(shape);
  auto req = [&](bool ok, auto&&... parts) {
    if (!ok) ::tilelink::detail::fail("gemm[", who, "] M=", s.M, " N=", s.N, " K=", s.K, ": ", parts...);
  };
  req(s.M >= 0 && s.N >= 0 && s.K >= 0, "negative dimension");
  const int64_t kMax = int64_t(1) << 31;
  req(s.M < kMax && s.N < kMax && s.K < kMax, "dimensions must be < 2^31");
  if (s.M == 0 || s.N == 0) return;
  req(s.K > 0, "K must be positive (K = 0 would leave D unwritten)");
  req(s.N % 8 == 0, "N must be a multiple of 8 (16-byte TMA rows of D)");
  req(s.K % 8 == 0, "K must be a multiple of 8 (16-byte TMA rows of A and B)");
  req(s.lda >= s.K && s.lda % 8 == 0, "lda=", s.lda, " must be >= K and a multiple of 8");
  req(s.ldb >= s.K && s.ldb % 8 == 0, "ldb=", s.ldb, " must be >= K and a multiple of 8");
  req(s.ldd >= s.N && s.ldd % 8 == 0, "ldd=", s.ldd, " must be >= N and a multiple of 8");
  req(A != nullptr && B != nullptr && D != nullptr, "null operand pointer");
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  req(aligned(A), "A is not 16-byte aligned");
  req(aligned(B), "B is not 16-byte aligned");
  req(aligned(D), "D is not 16-byte aligned");
}

namespace detail {

int current_device_or_throw(const char* who) {
  int device = -1;
  const cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) ::tilelink::detail::fail("gemm[", who, "]: cudaGetDevice failed: ", cudaGetErrorString(e));
  return device;
}

int device_sm_count(int device) {
  static std::atomic<int> cache[64] = {};
  if (device >= 0 && device < 64) {
    const int c = cache[device].load(std::memory_order_relaxed);
    if (c > 0) return c;
  }
  int sms = 0;
  const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess || sms <= 0) ::tilelink::detail::fail("gemm: cannot query SM count of device ", device);
  if (device >= 0 && device < 64) cache[device].store(sms, std::memory_order_relaxed);
  return sms;
}

namespace {
struct KernelSetups {
  std::mutex mutex;
  std::vector<KernelSetup> setups;
  std::set<int> prepared;  // devices
};
KernelSetups& kernel_setups() {
  static KernelSetups k;
  return k;
}
}  // namespace

bool register_kernel_setup(KernelSetup setup) {
  auto& k = kernel_setups();
  std::lock_guard<std::mutex> lock(k.mutex);
  k.setups.push_back(setup);
  return true;
}

}  // namespace detail

void prepare_kernels() {
  const int device = detail::current_device_or_throw("prepare_kernels");
  auto& k = detail::kernel_setups();
  std::lock_guard<std::mutex> lock(k.mutex);
  if (!k.prepared.insert(device).second) return;
  for (detail::KernelSetup setup : k.setups) setup(device);
}

// ---- heuristic -----------------------------------------------------------------------------
// Rule (docs/GEMM.md "Heuristic"): every `lib` config gets
//     score = wave_efficiency(shape, tile, SMs) * throughput_prior(config, K)
// and the best score wins; ties go to the earlier (simpler) config. wave_efficiency is the
// fraction of the persistent grid's tile slots that do useful work (partial edge tiles count
// for their covered area); the priors are each kernel's relative per-tile speed, fitted to the
// device sweep (tilelink-bench gemm --sweep). Raster/swizzle: along_n, swizzle by B's size.
namespace {

double wave_efficiency(const GemmShape& s, const GemmConfigInfo& c, int sms) {
  const int64_t tm = c.tile_m, tn = c.tile_n;
  // Cluster units: the persistent grid holds sms / cluster_size clusters.
  const int64_t cm = c.cluster_m, cn = c.cluster_n;
  const int64_t units_m = (s.M + tm * cm - 1) / (tm * cm);
  const int64_t units_n = (s.N + tn * cn - 1) / (tn * cn);
  const int64_t slots = std::max<int64_t>(1, sms / (cm * cn));
  const int64_t units = units_m * units_n;
  const int64_t waves = (units + slots - 1) / slots;
  const double useful = double(s.M) * double(s.N);
  const double capacity = double(waves) * double(slots) * double(tm * cm) * double(tn * cn);
  return useful / capacity;
}

// Relative per-tile speed of each kernel against cuBLAS on full waves, for K > 2048 and
// K <= 2048: the median over the reference shapes of (best ratio to cuBLAS) / wave_efficiency,
// from `tilelink-bench gemm --sweep` on the H200 (2026-11-29, docs/PERF.md). The 128x176,
// 256x112, 128x144 and 128x224 tiles measured 0.4-0.7x cuBLAS there and were dropped.
// pp_64x128_c2x1 is fitted to the decode-sized-M sweep instead (M = 128, N 8192, K 3584).
struct Prior {
  GemmConfig config;
  double long_k, short_k;
  int64_t max_m = 0;          // > 0: the values above were measured up to this M only...
  double beyond_max_m = 0.0;  // ...and this one applies above it
};
constexpr Prior kPriors[] = {
    {GemmConfig::coop_128x256_c2x1, 1.041, 1.004}, {GemmConfig::coop_128x256_c1x1, 1.041, 0.992},
    {GemmConfig::pp_128x192_c2x1, 1.069, 1.068},   {GemmConfig::pp_128x128_c2x1, 1.039, 1.043},
    {GemmConfig::pp_128x128_c1x2, 1.02, 1.02},  // at its best raster (along_m) a bit below c2x1
    // Decode-sized M: 0.96x cuBLAS at M = 128 (wave efficiency 0.97), `gemm --sweep --shapes decode`,
    // 2026-11-29 evening. Its 2x1 cluster multicasts each B tile to both 64-row tiles: decode GEMMs are
    // bound by reading B, and the 1x2 cluster (B read twice through L2) reached only 0.80x.
    // Above decode sizes (unmeasured there) it stays below every 128-row tile.
    {GemmConfig::pp_64x128_c2x1, 0.99, 0.99, 512, 0.83},
    {GemmConfig::coop_256x128_c1x2, 1.041, 1.001}, {GemmConfig::coop_128x192_c2x1, 1.038, 0.992},
    {GemmConfig::coop_128x256_c1x2, 1.037, 0.999}, {GemmConfig::coop_256x128_c2x1, 1.041, 0.993},
    {GemmConfig::coop_128x128_c2x1, 1.024, 0.952}, {GemmConfig::pp_64x128_c1x2, 0.83, 0.83},
};

double throughput_prior(GemmConfig cfg, const GemmShape& s) {
  const bool short_k = s.K <= 2048;
  for (const Prior& p : kPriors) {
    if (p.config != cfg) continue;
    if (p.max_m > 0 && s.M > p.max_m) return p.beyond_max_m;
    return short_k ? p.short_k : p.long_k;
  }
  // Configs without a fitted prior (sweep set, when allowed): by tile area.
  const GemmConfigInfo& c = config_info(cfg);
  if (c.schedule == GemmSchedule::pp) return 0.90;
  const int area = c.tile_m * c.tile_n;
  const double p = area >= 128 * 256 ? 1.0 : area >= 128 * 192 ? 0.97 : area >= 128 * 176 ? 0.96 : 0.93;
  return short_k ? p * 0.96 : p;
}

}  // namespace

GemmPlan choose_config(const GemmShape& shape, DType /*dtype*/, int sm_budget, uint64_t allowed) {
  const GemmShape s = packed(shape);
  int sms = sm_budget;
  if (sms <= 0) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) device = 0;
    int n = 0;
    sms = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess && n > 0 ? n : 132;
  }
  TL_REQUIRE(allowed != 0, "gemm: choose_config with an empty config mask");
  if (s.M <= 0 || s.N <= 0) return GemmPlan{};  // nothing to compute: any plan launches nothing
  GemmPlan best{};
  double best_score = -1.0;
  for (int i = 0; i < kNumGemmConfigs; ++i) {
    const GemmConfigInfo& c = kGemmConfigInfo[i];
    if (!(allowed & (uint64_t(1) << i))) continue;
    if (c.cluster_m * c.cluster_n > sms) continue;
    const double score = wave_efficiency(s, c, sms) * throughput_prior(static_cast<GemmConfig>(i), s);
    if (score > best_score + 1e-9) {
      best_score = score;
      best.config = static_cast<GemmConfig>(i);
    }
  }
  TL_REQUIRE(best_score >= 0, "gemm: no allowed config fits an SM budget of ", sms);
  // Raster and swizzle: the sweep's most robust setting per kernel (geometric mean and worst case
  // over the reference shapes, docs/GEMM.md): along_n with swizzle 2 (0.96-0.99 mean, >= 0.80
  // worst), except the 1x2-cluster ping-pong, which prefers along_m (0.978 mean).
  const GemmConfigInfo& chosen = config_info(best.config);
  best.raster = chosen.schedule == GemmSchedule::pp && chosen.cluster_n > 1 ? Raster::along_m : Raster::along_n;
  // One row of clusters (decode-sized M): swizzle 2 left half the persistent grid idle there
  // (M = 256, pp_128x128_c2x1: 0.61x cuBLAS with swizzle 2, 0.93x with 1).
  const bool one_cluster_row = s.M <= int64_t(chosen.tile_m) * chosen.cluster_m;
  best.swizzle = one_cluster_row ? 1 : 2;
  return best;
}

// ---- run-time dtype entry point ----------------------------------------------------------
void gemm(DType dtype, const void* A, const void* B, void* D, const GemmShape& shape, const GemmPlan* plan,
          int sm_budget, cudaStream_t stream) {
  const GemmPlan p = plan ? *plan : choose_config(shape, dtype, sm_budget);
  switch (dtype) {
    case DType::bf16: {
      GemmArgs<__nv_bfloat16> a{static_cast<const __nv_bfloat16*>(A), static_cast<const __nv_bfloat16*>(B),
                                static_cast<__nv_bfloat16*>(D), shape};
      run_gemm(a, NoHooks{}, p, sm_budget, stream);
      return;
    }
    case DType::fp16: {
      GemmArgs<__half> a{static_cast<const __half*>(A), static_cast<const __half*>(B), static_cast<__half*>(D),
                         shape};
      run_gemm(a, NoHooks{}, p, sm_budget, stream);
      return;
    }
  }
  ::tilelink::detail::fail("gemm: unsupported dtype ", static_cast<int>(dtype), " (bf16 and fp16 only)");
}

}  // namespace tilelink::gemm
