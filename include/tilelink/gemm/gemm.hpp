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

#include "tilelink/core/dtype.hpp"
#include "tilelink/gemm/configs.inc"

namespace tilelink::gemm {

struct NoHooks;  // hooks.cuh: the hooks of a plain GEMM

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
enum class GemmSchedule : uint8_t { coop, pp, sk };
enum class GemmOperands : uint8_t { ab, ba };
enum class GemmConfigSet : uint8_t { lib, sweep, plain };

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
  GemmOperands operands;
  GemmConfigSet set;
};

inline constexpr GemmConfigInfo kGemmConfigInfo[] = {
#define TILELINK_GEMM_X_INFO(name, sched, tm, tn, tk, cm, cn, st, en, ops, set) \
  {#name, GemmSchedule::sched, tm, tn, tk, cm, cn, st, en, GemmOperands::ops, GemmConfigSet::set},
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

// How an `sk` config divides the work (the other schedules are always data_parallel):
//   data_parallel  one CTA per output tile, the whole K
//   split_k        `splits` CTAs per output tile, each a contiguous slice of K; the partial sums
//                  meet in a workspace, the slice that finishes a tile last stores it
//   stream_k       CUTLASS's stream-K: every CTA takes an equal share of all tiles' K
//                  iterations, so the last wave is not ragged
//   split_k_reduce `splits` slices of K run as one batched launch writing fp32 partial sums to
//                  the workspace, then one pass adds them into D in a fixed order: no chain between
//                  slices, so many slices pay off. Slices are whole 8-element steps; the last
//                  columns no slice holds (fewer than 8 x splits) are added by that pass.
enum class Decomposition : uint8_t { data_parallel, split_k, stream_k, split_k_reduce };
const char* decomposition_name(Decomposition d);

// Everything one launch needs besides the operands: compiled kernel, work division, tile order.
struct GemmPlan {
  GemmConfig config = GemmConfig::coop_128x256_c2x1;
  Raster raster = Raster::along_n;
  int swizzle = 1;
  Decomposition decomposition = Decomposition::data_parallel;
  int splits = 1;  // split_k, split_k_reduce: slices of K per output tile (2..kMaxSplits)

  // The same kernel run the same way (config, tile order, division).
  friend constexpr bool operator==(const GemmPlan&, const GemmPlan&) = default;
};
inline constexpr int kMaxSplits = 32;

// split_k_reduce's cut of K: `splits` slices of `slice_k` columns each from column 0 (whole
// 8-element steps, so every slice's operands stay 16-byte aligned for TMA), then `tail` columns
// (K - splits x slice_k < 8 x splits) that the summing pass multiplies itself.
struct KSlices {
  int64_t slice_k = 0, tail = 0;
};
inline constexpr KSlices k_slices(int64_t K, int splits) {
  const int64_t slice_k = splits > 0 ? K / (8 * int64_t(splits)) * 8 : 0;
  return {slice_k, K - int64_t(splits) * slice_k};
}

// Bit i set = GemmConfig i allowed. kLibConfigMask: the `lib` set (what the fused ops' hooked
// kernels are compiled for); kPlainConfigMask: lib + plain (what the plain GEMM chooses among).
inline constexpr uint64_t config_bit(GemmConfig c) { return uint64_t(1) << static_cast<int>(c); }
inline constexpr uint64_t config_mask_of(GemmConfigSet set) {
  uint64_t m = 0;
  for (int i = 0; i < kNumGemmConfigs; ++i)
    if (kGemmConfigInfo[i].set == set) m |= uint64_t(1) << i;
  return m;
}
inline constexpr uint64_t kLibConfigMask = config_mask_of(GemmConfigSet::lib);
inline constexpr uint64_t kPlainConfigMask = kLibConfigMask | config_mask_of(GemmConfigSet::plain);
static_assert(kNumGemmConfigs <= 64, "config masks are 64-bit");

// Who runs the plan. A fused op's kernel consumes and publishes rows of tiles through its hooks,
// so its tile order is also the order of the overlap: fused_op keeps the order the ops were
// measured with (along N, swizzle 2). A plain GEMM takes the order that is fastest alone: along
// the shorter of the two tile dimensions, so the tiles sharing the larger operand's slice run in
// the same wave and that operand is read from memory once (CUTLASS's own raster rule), swizzle 1.
enum class PlanUse : uint8_t { fused_op, plain };

// The documented heuristic (docs/GEMM.md): picks a config among `allowed` (default: the `lib`
// set), its work division, raster and swizzle for the shape. sm_budget <= 0 means the whole
// device. Pure given sm_budget > 0 (no device query); CPU-tested.
GemmPlan choose_config(const GemmShape& shape, DType dtype, int sm_budget, uint64_t allowed = kLibConfigMask,
                       PlanUse use = PlanUse::fused_op);

// Throws tilelink::Error (naming the problem) if the operands cannot be run: N or K not a
// multiple of 8, a leading dimension too small or not a multiple of 8, a pointer not 16-byte
// aligned, an unsupported dtype. Called by run_gemm; exposed for ops that validate early.
void validate(const GemmShape& shape, const void* A, const void* B, const void* D, const char* who);

// ---- launching ---------------------------------------------------------------------------
struct GemmLaunchOptions {
  int sm_budget = 0;  // SMs the persistent grid may occupy; <= 0: all of the device
  Raster raster = Raster::along_n;
  int swizzle = 1;
  Decomposition decomposition = Decomposition::data_parallel;
  int splits = 1;
  // Device scratch for split_k / stream_k partial sums (gemm_workspace_bytes says how much;
  // 128-byte aligned). nullptr: the engine takes it from its own stream-ordered pool per launch.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // Plain GEMMs (NoHooks) only: launch with programmatic dependent launch, so the kernel's
  // prologue overlaps the previous kernel on the stream; it waits for that kernel on the device
  // before reading any operand. False: a plain stream-ordered launch.
  bool overlap_previous = true;
};
inline GemmLaunchOptions launch_options(const GemmPlan& p, int sm_budget) {
  GemmLaunchOptions o;
  o.sm_budget = sm_budget;
  o.raster = p.raster;
  o.swizzle = p.swizzle;
  o.decomposition = p.decomposition;
  o.splits = p.splits;
  return o;
}

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
// The device's SM count, queried once per device (any kernel sizing a persistent grid uses it).
int device_sm_count(int device);
// The current device, or tilelink::Error naming `who` (the plain GEMM and every launch use it).
int current_device_or_throw(const char* who);

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

// Device bytes a launch of `plan` needs in GemmLaunchOptions::workspace (0 for data_parallel
// plans; queries the current device).
size_t gemm_workspace_bytes(const GemmShape& shape, DType dtype, const GemmPlan& plan, int sm_budget);
namespace detail {
template <class Element, GemmConfig C>
size_t workspace_bytes_of(const GemmShape& shape, const GemmLaunchOptions& opt);
// The K columns [k0, k0 + k) of A (M x K, row-major) and B (N x K) that no slice holds.
struct KTail {
  const void* A = nullptr;
  const void* B = nullptr;
  int64_t lda = 0, ldb = 0, k0 = 0, k = 0;
};
// D[m, n] = sum over l of partials[l][m][n] plus A[m, tail] . B[n, tail], in an order fixed by the
// shape and the GPU, rounded once (split_reduce.cu). `overlap_previous`: launched to overlap the
// partials kernel's tail, waiting for it on the device.
void launch_split_reduce(DType dtype, const float* partials, int splits, int64_t M, int64_t N, void* D, int64_t ldd,
                         const KTail& tail, bool overlap_previous, cudaStream_t stream);
// Device scratch of one launch (split-K / stream-K partial sums): the caller's, or a
// stream-ordered allocation from the engine's own per-device pool, freed after the launch in
// stream order (inside CUDA graph capture: a graph allocation). Defined in gemm.cpp.
class LaunchWorkspace {
 public:
  LaunchWorkspace(size_t bytes, void* caller, size_t caller_bytes, cudaStream_t stream, const char* who);
  ~LaunchWorkspace();
  LaunchWorkspace(const LaunchWorkspace&) = delete;
  LaunchWorkspace& operator=(const LaunchWorkspace&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  bool owned_ = false;
  cudaStream_t stream_ = nullptr;
};
}  // namespace detail

// Dispatch over the `lib` configs (and, for NoHooks, the `plain` ones): needs all of them
// instantiated for (Element, Hooks).
template <class Element, class Hooks>
void run_gemm(const GemmArgs<Element>& args, const Hooks& hooks, const GemmPlan& plan,
              int sm_budget, cudaStream_t stream) {
  static_assert(detail::is_gemm_element<Element>::value,
                "run_gemm: Element must be __nv_bfloat16 or __half");
  const GemmLaunchOptions opt = launch_options(plan, sm_budget);
  constexpr bool kPlain = std::is_same_v<Hooks, NoHooks>;
  switch (plan.config) {
#define TILELINK_GEMM_X_CASE_lib(name)                        \
  case GemmConfig::name:                                      \
    return gemm_launch<Element, Hooks, GemmConfig::name>(args, hooks, opt, stream);
#define TILELINK_GEMM_X_CASE_plain(name)                                            \
  case GemmConfig::name:                                                            \
    if constexpr (kPlain) return gemm_launch<Element, Hooks, GemmConfig::name>(args, hooks, opt, stream); \
    break;
#define TILELINK_GEMM_X_CASE_sweep(name)
#define TILELINK_GEMM_X_CASE(name, sched, tm, tn, tk, cm, cn, st, en, ops, set) \
  TILELINK_GEMM_X_CASE_##set(name)
    TILELINK_GEMM_CONFIGS(TILELINK_GEMM_X_CASE)
#undef TILELINK_GEMM_X_CASE
#undef TILELINK_GEMM_X_CASE_lib
#undef TILELINK_GEMM_X_CASE_plain
#undef TILELINK_GEMM_X_CASE_sweep
    default:
      break;
  }
  fail_config_not_in_set(plan.config, kPlain ? "run_gemm (only `lib` and `plain` configs are dispatched)"
                                             : "run_gemm with hooks (only `lib` configs are dispatched)");
}

// Dispatch over an explicit subset, for ops that instantiate fewer configs for their hooks:
//   run_gemm_among<E, H, GemmConfig::coop_128x256_c2x1, GemmConfig::pp_128x128_c2x1>(...)
// with choose_config(shape, dtype, budget, config_bit(a) | config_bit(b)) picking among them.
template <class Element, class Hooks, GemmConfig... Cs>
void run_gemm_among(const GemmArgs<Element>& args, const Hooks& hooks, const GemmPlan& plan, int sm_budget,
                    cudaStream_t stream) {
  static_assert(detail::is_gemm_element<Element>::value,
                "run_gemm_among: Element must be __nv_bfloat16 or __half");
  const GemmLaunchOptions opt = launch_options(plan, sm_budget);
  bool done = false;
  ((plan.config == Cs && !done ? (gemm_launch<Element, Hooks, Cs>(args, hooks, opt, stream), done = true) : false),
   ...);
  if (!done) fail_config_not_in_set(plan.config, "run_gemm_among (not among the instantiated configs)");
}

// Plain GEMM through the library instantiations (NoHooks), dtype chosen at run time.
// `plan == nullptr` uses choose_config among lib + plain (kPlainConfigMask, PlanUse::plain).
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
