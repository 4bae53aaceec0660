// tilelink/gemm/gemm.hpp — host API of the GEMM engine (no CUTLASS here; plain C++ can include it).
//
//   D[M,N] = A[M,K] · B[N,K]ᵀ      A, B, D row-major ("TN": both operands K-major),
//                                  bf16 or fp16 in and out, fp32 accumulation.
//
//   GemmArgs<__nv_bfloat16> args{A, B, D, {M, N, K, lda, ldb, ldd}};
//   GemmPlan plan = choose_config(args.shape, DType::bf16, sm_budget);
//   run_gemm(args, NoHooks{}, plan, sm_budget, stream);           // throws tilelink::Error
//
// A fused op passes its own Hooks type (see hooks.cuh); run_gemm<Element, Hooks> then needs the
// kernels instantiated for that pair, one translation unit per config:
//   CMake:  tilelink_gemm_instantiate(TARGET tilelink NAME ag HEADER tilelink/tile/gemm_hooks.cuh
//                                     HOOKS tilelink::tile::GatherWaitHooks)
//   or by hand in a .cu file:  #include "tilelink/gemm/engine.cuh"
//                              TILELINK_GEMM_INSTANTIATE(__nv_bfloat16, MyHooks, coop_128x256_c2x1)
// A missing instantiation is a link error naming gemm_launch<Element, Hooks, config>.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "tilelink/gemm/configs.inc"
#include "tilelink/core/dtype.hpp"

namespace tilelink::gemm {

struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;  // leading dimensions in elements; 0 = packed (K, K, N)
};

template <class Element>
struct GemmArgs {
  const Element* A = nullptr;  // [M, lda], row-major, rows of K used
  const Element* B = nullptr;  // [N, ldb], row-major, rows of K used
  Element* D = nullptr;        // [M, ldd], row-major, N columns written
  GemmShape shape{};
};

// ---- configurations ----------------------------------------------------------------------
enum class GemmSchedule : uint8_t { coop, pp };
enum class GemmConfigSet : uint8_t { lib, sweep };

enum class GemmConfig : uint8_t {
#define TILELINK_GEMM_X_ENUM(name, ...) name,
  TILELINK_GEMM_CONFIGS(TILELINK_GEMM_X_ENUM)
#undef TILELINK_GEMM_X_ENUM
      count
};
inline constexpr int kNumGemmConfigs = static_cast<int>(GemmConfig::count);

struct GemmConfigInfo {
  const char* name;
  GemmSchedule schedule;
  int tile_m, tile_n, tile_k;
  int cluster_m, cluster_n;
  int stages;  // 0 = auto
  int epi_n;   // 0 = auto
  GemmConfigSet set;
};

inline constexpr GemmConfigInfo kGemmConfigInfo[] = {
#define TILELINK_GEMM_X_INFO(name, sched, tm, tn, tk, cm, cn, st, en, set) \
  {#name, GemmSchedule::sched, tm, tn, tk, cm, cn, st, en, GemmConfigSet::set},
    TILELINK_GEMM_CONFIGS(TILELINK_GEMM_X_INFO)
#undef TILELINK_GEMM_X_INFO
};

inline constexpr const GemmConfigInfo& config_info(GemmConfig c) {
  return kGemmConfigInfo[static_cast<int>(c)];
}
inline const char* config_name(GemmConfig c) { return config_info(c).name; }
// Parses a config name (as printed by config_name); returns false if unknown.
bool parse_config(const std::string& name, GemmConfig* out);

// Tile order of the persistent scheduler. along_n: consecutive work units walk along N (an M
// unit's whole row of tiles is visited before the next M unit); along_m: the other way.
// `swizzle` (1, 2, 4, 8) groups that many clusters along the slow dimension for L2 reuse.
enum class Raster : uint8_t { heuristic, along_m, along_n };
const char* raster_name(Raster r);

// Everything one launch needs besides the operands: compiled kernel + run-time tile order.
struct GemmPlan {
  GemmConfig config = GemmConfig::coop_128x256_c2x1;
  Raster raster = Raster::along_n;
  int swizzle = 1;
};

// Bit i set = GemmConfig i allowed. kLibConfigMask: the `lib` set.
inline constexpr uint64_t config_bit(GemmConfig c) { return uint64_t(1) << static_cast<int>(c); }
inline constexpr uint64_t kLibConfigMask = [] {
  uint64_t m = 0;
  for (int i = 0; i < kNumGemmConfigs; ++i)
    if (kGemmConfigInfo[i].set == GemmConfigSet::lib) m |= uint64_t(1) << i;
  return m;
}();
static_assert(kNumGemmConfigs <= 64, "config masks are 64-bit");

// The documented heuristic (docs/GEMM.md): picks a config among `allowed` (default: the `lib`
// set), raster and swizzle for the shape. sm_budget <= 0 means the whole device.
GemmPlan choose_config(const GemmShape& shape, DType dtype, int sm_budget, uint64_t allowed = kLibConfigMask);

// Throws tilelink::Error (naming the problem) if the operands cannot be run: N or K not a
// multiple of 8, a leading dimension too small or not a multiple of 8, a pointer not 16-byte
// aligned, an unsupported dtype. Called by run_gemm; exposed for ops that validate early.
void validate(const GemmShape& shape, const void* A, const void* B, const void* D, const char* who);

// ---- launching ---------------------------------------------------------------------------
struct GemmLaunchOptions {
  int sm_budget = 0;  // SMs the persistent grid may occupy; <= 0: all of the device
  Raster raster = Raster::along_n;
  int swizzle = 1;
};

namespace detail {
template <class T>
struct is_gemm_element : std::false_type {};
template <>
struct is_gemm_element<__nv_bfloat16> : std::true_type {};
template <>
struct is_gemm_element<__half> : std::true_type {};
}  // namespace detail

// Per-device, one-time setup of every compiled GEMM kernel (its shared-memory attribute, the
// clusters that fit on the device) on the current device; idempotent and thread-safe. A Context
// calls it when it is created: these driver calls may wait for the device, so they must not run
// inside an op call while other ranks' kernels on the same GPU spin on this rank's signals. A
// kernel not set up by then is set up at its first launch.
void prepare_kernels();

namespace detail {
using KernelSetup = void (*)(int device);
// Adds a kernel's setup to the list prepare_kernels runs (TILELINK_GEMM_INSTANTIATE does this).
bool register_kernel_setup(KernelSetup setup);
}  // namespace detail

// One compiled kernel. Defined in engine.cuh, instantiated per (Element, Hooks, Config) by
// TILELINK_GEMM_INSTANTIATE. Validates (see validate), then launches on `stream`.
template <class Element, class Hooks, GemmConfig C>
void gemm_launch(const GemmArgs<Element>& args, const Hooks& hooks, const GemmLaunchOptions& opt,
                 cudaStream_t stream);

[[noreturn]] void fail_config_not_in_set(GemmConfig c, const char* what);

// Dispatch over the `lib` configs: needs all of them instantiated for (Element, Hooks).
template <class Element, class Hooks>
void run_gemm(const GemmArgs<Element>& args, const Hooks& hooks, const GemmPlan& plan,
              int sm_budget, cudaStream_t stream) {
  static_assert(detail::is_gemm_element<Element>::value,
                "run_gemm: Element must be __nv_bfloat16 or __half");
  const GemmLaunchOptions opt{sm_budget, plan.raster, plan.swizzle};
  switch (plan.config) {
#define TILELINK_GEMM_X_CASE_lib(name)                        \
  case GemmConfig::name:                                      \
    return gemm_launch<Element, Hooks, GemmConfig::name>(args, hooks, opt, stream);
#define TILELINK_GEMM_X_CASE_sweep(name)
#define TILELINK_GEMM_X_CASE(name, sched, tm, tn, tk, cm, cn, st, en, set) \
  TILELINK_GEMM_X_CASE_##set(name)
    TILELINK_GEMM_CONFIGS(TILELINK_GEMM_X_CASE)
#undef TILELINK_GEMM_X_CASE
#undef TILELINK_GEMM_X_CASE_lib
#undef TILELINK_GEMM_X_CASE_sweep
    default:
      fail_config_not_in_set(plan.config, "run_gemm (only `lib` configs are dispatched)");
  }
}

// Dispatch over an explicit subset, for ops that instantiate fewer configs for their hooks:
//   run_gemm_among<E, H, GemmConfig::coop_128x256_c2x1, GemmConfig::pp_128x128_c2x1>(...)
// with choose_config(shape, dtype, budget, config_bit(a) | config_bit(b)) picking among them.
template <class Element, class Hooks, GemmConfig... Cs>
void run_gemm_among(const GemmArgs<Element>& args, const Hooks& hooks, const GemmPlan& plan, int sm_budget,
                    cudaStream_t stream) {
  static_assert(detail::is_gemm_element<Element>::value,
                "run_gemm_among: Element must be __nv_bfloat16 or __half");
  const GemmLaunchOptions opt{sm_budget, plan.raster, plan.swizzle};
  bool done = false;
  ((plan.config == Cs && !done ? (gemm_launch<Element, Hooks, Cs>(args, hooks, opt, stream), done = true) : false),
   ...);
  if (!done) fail_config_not_in_set(plan.config, "run_gemm_among (not among the instantiated configs)");
}

// Plain GEMM through the library instantiations (NoHooks), dtype chosen at run time.
// `plan == nullptr` uses choose_config.
void gemm(DType dtype, const void* A, const void* B, void* D, const GemmShape& shape,
          const GemmPlan* plan, int sm_budget, cudaStream_t stream);

// Fills lda/ldb/ldd left at 0 with the packed values (K, K, N).
inline GemmShape packed(GemmShape s) {
  if (s.lda == 0) s.lda = s.K;
  if (s.ldb == 0) s.ldb = s.K;
  if (s.ldd == 0) s.ldd = s.N;
  return s;
}

}  // namespace tilelink::gemm
