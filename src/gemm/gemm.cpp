// Host side of the GEMM engine: names and validation, kernel setup per device, the split
// workspace, the run-time-dtype entry point. The config heuristic lives in heuristic/.
#include "tilelink/gemm/gemm.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "heuristic/plain_plan.hpp"
#include "tilelink/gemm/hooks.cuh"
#include "tilelink/core/error.hpp"
#include "tilelink/core/stream_capture.hpp"
#include "tilelink/gemm/tuning.hpp"

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

const char* decomposition_name(Decomposition d) {
  switch (d) {
    case Decomposition::split_k: return "split_k";
    case Decomposition::stream_k: return "stream_k";
    case Decomposition::split_k_reduce: return "split_k_reduce";
    default: return "data_parallel";
  }
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

// ---- workspace -------------------------------------------------------------------------------
size_t gemm_workspace_bytes(const GemmShape& shape, DType dtype, const GemmPlan& plan, int sm_budget) {
  if (config_info(plan.config).set != GemmConfigSet::plain) return 0;
  const GemmLaunchOptions opt = launch_options(plan, sm_budget);
  switch (plan.config) {
#define TILELINK_GEMM_X_WS_plain(name)                                                          \
  case GemmConfig::name:                                                                        \
    return dtype == DType::bf16 ? detail::workspace_bytes_of<__nv_bfloat16, GemmConfig::name>(shape, opt) \
                                : detail::workspace_bytes_of<__half, GemmConfig::name>(shape, opt);
#define TILELINK_GEMM_X_WS_lib(name)
#define TILELINK_GEMM_X_WS_sweep(name)
#define TILELINK_GEMM_X_WS(name, sched, tm, tn, tk, cm, cn, st, en, ops, set) TILELINK_GEMM_X_WS_##set(name)
    TILELINK_GEMM_CONFIGS(TILELINK_GEMM_X_WS)
#undef TILELINK_GEMM_X_WS
#undef TILELINK_GEMM_X_WS_plain
#undef TILELINK_GEMM_X_WS_lib
#undef TILELINK_GEMM_X_WS_sweep
    default:
      fail_config_not_in_set(plan.config, "gemm_workspace_bytes (`sk` configs are compiled as `plain`)");
  }
}

namespace detail {
namespace {
// The engine's own pool per device: stream-ordered, and it keeps what it has (release threshold
// unlimited) so a launch after a synchronisation does not map memory again. Its own pool, not
// the device's default one, so the program's allocator settings are left alone.
cudaMemPool_t engine_pool(int device) {
  static std::mutex mutex;
  static cudaMemPool_t pools[64] = {};
  TL_REQUIRE(device >= 0 && device < 64, "gemm: device ", device, " out of range for the workspace pool");
  std::lock_guard<std::mutex> lock(mutex);
  if (pools[device] == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    cudaError_t e = cudaMemPoolCreate(&pool, &props);
    TL_REQUIRE(e == cudaSuccess, "gemm: cudaMemPoolCreate failed: ", cudaGetErrorString(e));
    uint64_t keep = UINT64_MAX;
    e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    TL_REQUIRE(e == cudaSuccess, "gemm: cudaMemPoolSetAttribute failed: ", cudaGetErrorString(e));
    pools[device] = pool;
  }
  return pools[device];
}
}  // namespace

LaunchWorkspace::LaunchWorkspace(size_t bytes, void* caller, size_t caller_bytes, cudaStream_t stream,
                                 const char* who)
    : stream_(stream) {
  if (bytes == 0) return;
  if (caller != nullptr) {
    TL_REQUIRE(caller_bytes >= bytes && reinterpret_cast<uintptr_t>(caller) % 128 == 0, "gemm[", who,
               "]: the workspace must be 128-byte aligned and hold ", bytes, " bytes (got ", caller_bytes,
               "; gemm_workspace_bytes says how much)");
    ptr_ = caller;
    return;
  }
  cudaError_t e = cudaSuccess;
  if (::tilelink::detail::stream_capturing(stream)) {
    e = cudaMallocAsync(&ptr_, bytes, stream);  // a graph allocation, owned by the graph's replays
  } else {
    e = cudaMallocFromPoolAsync(&ptr_, bytes, engine_pool(current_device_or_throw(who)), stream);
  }
  TL_REQUIRE(e == cudaSuccess, "gemm[", who, "]: cannot allocate a ", bytes,
             "-byte split-K workspace: ", cudaGetErrorString(e));
  owned_ = true;
}

LaunchWorkspace::~LaunchWorkspace() {
  if (owned_) (void)cudaFreeAsync(ptr_, stream_);
}
}  // namespace detail

// ---- run-time dtype entry point ----------------------------------------------------------
void gemm(DType dtype, const void* A, const void* B, void* D, const GemmShape& shape, const GemmPlan* plan,
          int sm_budget, cudaStream_t stream) {
  const GemmPlan p = plan ? *plan : detail::plain_call_plan(dtype, A, B, D, shape, sm_budget, stream);
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
