// tilelink/gemm/engine.cuh — kernel assembly and the launch template. Include ONLY from .cu files
// that instantiate kernels (TILELINK_GEMM_INSTANTIATE): it pulls in CUTLASS and takes ~30-40 s
// of compile per instantiated config. Everybody else includes gemm.hpp.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/kernel_hardware_info.hpp"
#include "tilelink/gemm/collectives.cuh"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/gemm/hooks.cuh"
#include "tilelink/core/error.hpp"

namespace tilelink::gemm {
namespace detail {

template <class T>
struct cutlass_element;
template <>
struct cutlass_element<__nv_bfloat16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct cutlass_element<__half> {
  using type = cutlass::half_t;
};
template <>
struct cutlass_element<float> {  // split_k_reduce's fp32 partial sums
  using type = float;
};

// Kernel and epilogue schedules and the tile scheduler of each GemmSchedule. The data-parallel
// schedules take HookedSchedulerTag (hooks.order_m); `sk` takes CUTLASS's stream-K scheduler,
// whose split tiles are outside the hook contract (plain configs, NoHooks only).
template <GemmSchedule S, class Hooks>
struct schedule_types;
template <class Hooks>
struct schedule_types<GemmSchedule::coop, Hooks> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using Scheduler = HookedSchedulerTag<Hooks>;
  static constexpr int kEpiM = 128;
};
template <class Hooks>
struct schedule_types<GemmSchedule::pp, Hooks> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
  using Scheduler = HookedSchedulerTag<Hooks>;
  static constexpr int kEpiM = 64;
};
template <class Hooks>
struct schedule_types<GemmSchedule::sk, Hooks> {
  static_assert(std::is_same_v<Hooks, NoHooks>,
                "gemm: `sk` configs (split-K / stream-K, swapped operands) run without hooks only");
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using Scheduler = StreamKSchedulerTag;  // CUTLASS's stream-K scheduler (collectives.cuh)
  static constexpr int kEpiM = 128;
};

template <GemmConfig C, class Hooks>
struct ConfigTraits {
  static constexpr GemmConfigInfo kInfo = config_info(C);
  static constexpr bool kSwapped = kInfo.operands == GemmOperands::ba;
  using TileShape = cute::Shape<cute::Int<kInfo.tile_m>, cute::Int<kInfo.tile_n>, cute::Int<kInfo.tile_k>>;
  using ClusterShape = cute::Shape<cute::Int<kInfo.cluster_m>, cute::Int<kInfo.cluster_n>, cute::_1>;
  using Sched = schedule_types<kInfo.schedule, Hooks>;
  // Swapped operands compute Dᵀ = B·Aᵀ: Dᵀ column-major is D row-major.
  using LayoutD = cute::conditional_t<kSwapped, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using EpilogueTile = cute::conditional_t<kInfo.epi_n == 0, cutlass::epilogue::collective::EpilogueTileAuto,
                                           cute::Shape<cute::Int<Sched::kEpiM>, cute::Int<(kInfo.epi_n ? kInfo.epi_n : 16)>>>;
};

// Out: D's element (ElementIn, or float for split_k_reduce's partial sums).
template <class ElementIn, class Hooks, GemmConfig C, class Out = ElementIn>
struct Kernel {
  using Element = typename cutlass_element<ElementIn>::type;
  using ElementD = typename cutlass_element<Out>::type;
  using Traits = ConfigTraits<C, Hooks>;
  using TileShape = typename Traits::TileShape;
  using ClusterShape = typename Traits::ClusterShape;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;  // 16 B for TMA
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;

  using BaseEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      typename Traits::EpilogueTile, float, float,                      //
      void, cutlass::layout::RowMajor, kAlign,                          // no C operand
      ElementD, typename Traits::LayoutD, kAlignD,                      // D
      typename Traits::Sched::Epilogue>::CollectiveOp;

  using StageCount = cute::conditional_t<
      Traits::kInfo.stages == 0,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename BaseEpilogue::SharedStorage))>,
      cutlass::gemm::collective::StageCount<(Traits::kInfo.stages ? Traits::kInfo.stages : 2)>>;

  using BaseMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,             //
      Element, cutlass::layout::RowMajor, kAlign,                       // A: M x K, K contiguous
      Element, cutlass::layout::ColumnMajor, kAlign,                    // B: stored N x K, K contiguous
      float, TileShape, ClusterShape, StageCount, typename Traits::Sched::Kernel>::CollectiveOp;

  using Mainloop = HookedMainloop<BaseMainloop, Hooks>;
  using Epilogue = HookedEpilogue<BaseEpilogue, Hooks, notify_mode_of<Hooks>::value>;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue,
                                                          typename Traits::Sched::Scheduler>;
};


// Whether this translation unit's CUTLASS kernels wait for the previous grid on the stream before
// touching global memory (CUTLASS_ENABLE_GDC_FOR_SM90): only then may a launch ask to overlap it.
#if defined(CUTLASS_ENABLE_GDC_FOR_SM90)
inline constexpr bool kKernelsWaitForPreviousGrid = true;
#else
inline constexpr bool kKernelsWaitForPreviousGrid = false;
#endif

// A cluster launch: the config and its attributes live together (cfg.attrs points into them).
// `overlap_previous`: programmatic dependent launch — the kernel may start while the previous
// kernel on the stream finishes (its prologue overlaps that tail) and waits for it on the device.
struct ClusterLaunch {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attrs[2]{};
  ClusterLaunch(int cluster_m, int cluster_n, dim3 grid, dim3 block, int smem_bytes, cudaStream_t stream,
                bool overlap_previous = false) {
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = cluster_m;
    attrs[0].val.clusterDim.y = cluster_n;
    attrs[0].val.clusterDim.z = 1;
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem_bytes;
    cfg.stream = stream;
    cfg.attrs = attrs;
    cfg.numAttrs = overlap_previous ? 2 : 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// Per-device, per-kernel one-time setup: the dynamic smem attribute and the number of clusters
// that fit on an empty device.
struct DeviceOnce {
  static constexpr int kMaxDevices = 64;
  std::atomic<int> max_active_clusters[kMaxDevices] = {};
};

template <class Element, class Hooks, GemmConfig C, class Out = Element>
DeviceOnce& device_once() {
  static DeviceOnce once;
  return once;
}

// One compiled cluster kernel, as its one-time setup sees it.
struct ClusterKernel {
  const void* fn;       // &cutlass::device_kernel<GemmKernel>
  int smem_bytes;
  int cluster_m, cluster_n;
  dim3 block;
  const char* engine;   // "gemm" or "grouped_gemm", for errors
  const char* name;     // the config
};

// The setup of one kernel on `device` (the current device): its dynamic shared memory attribute
// (per device) and the clusters that fit on an empty device, cached in `once`. Returns those.
inline int setup_cluster_kernel_on(const ClusterKernel& k, DeviceOnce& once, int device) {
  int max_clusters = device < DeviceOnce::kMaxDevices ? once.max_active_clusters[device].load() : 0;
  if (max_clusters > 0) return max_clusters;
  cudaError_t e = cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, k.smem_bytes);
  TL_REQUIRE(e == cudaSuccess, k.engine, "[", k.name, "]: cudaFuncSetAttribute(", k.smem_bytes,
             " B smem) failed: ", cudaGetErrorString(e));
  const ClusterLaunch one(k.cluster_m, k.cluster_n, dim3(k.cluster_m, k.cluster_n, 1), k.block, k.smem_bytes, nullptr);
  e = cudaOccupancyMaxActiveClusters(&max_clusters, k.fn, &one.cfg);
  if (e != cudaSuccess || max_clusters <= 0) {
    (void)cudaGetLastError();
    max_clusters = device_sm_count(device) / (k.cluster_m * k.cluster_n);
  }
  if (device < DeviceOnce::kMaxDevices) once.max_active_clusters[device].store(max_clusters);
  return max_clusters;
}

template <class Element, class Hooks, GemmConfig C, class Out = Element>
int setup_kernel_on(int device) {
  using GemmKernel = typename Kernel<Element, Hooks, C, Out>::GemmKernel;
  constexpr GemmConfigInfo info = config_info(C);
  const ClusterKernel k{reinterpret_cast<const void*>(&cutlass::device_kernel<GemmKernel>),
                        int(GemmKernel::SharedStorageSize), info.cluster_m, info.cluster_n,
                        GemmKernel::get_block_shape(), "gemm", info.name};
  return setup_cluster_kernel_on(k, device_once<Element, Hooks, C, Out>(), device);
}

template <class Element, class Hooks, GemmConfig C, class Out = Element>
void setup_kernel(int device) {
  setup_kernel_on<Element, Hooks, C, Out>(device);
}

}  // namespace detail

namespace detail {

// The kernel's Arguments for a packed shape (operands may be null: a workspace query). With
// k_batches > 1 (split_k_reduce) K is cut into k_batches slices of k_slices(K, k_batches).slice_k,
// run as the batch mode: slice l reads A and B at column l * slice_k and writes D's batch l
// (row-major [k_batches][M][ldd]); the columns after the last slice are the summing pass's.
template <class Element, class Hooks, GemmConfig C, class Out = Element>
typename Kernel<Element, Hooks, C, Out>::GemmKernel::Arguments make_arguments(
    const GemmShape& s, const void* A, const void* B, void* D, const Hooks& hooks, const GemmLaunchOptions& opt,
    int device, int budget, int max_clusters, int k_batches = 1) {
  using K = Kernel<Element, Hooks, C, Out>;
  using GemmKernel = typename K::GemmKernel;
  using E = typename K::Element;
  using ED = typename K::ElementD;
  const int64_t k_slice = k_batches > 1 ? k_slices(s.K, k_batches).slice_k : s.K;
  constexpr GemmConfigInfo info = config_info(C);
  const char* who = info.name;

  using StrideA = typename GemmKernel::StrideA;
  using StrideB = typename GemmKernel::StrideB;
  using StrideC = typename GemmKernel::StrideC;
  using StrideD = typename GemmKernel::StrideD;
  // The kernel's (M, N) operands: A and B as given, or swapped (its M runs over B's rows).
  constexpr bool swapped = K::Traits::kSwapped;
  const int64_t kM = swapped ? s.N : s.M, kN = swapped ? s.M : s.N;
  const int64_t ld_m = swapped ? s.ldb : s.lda, ld_n = swapped ? s.lda : s.ldb;
  StrideA dA = cute::make_stride(ld_m, cute::Int<1>{}, k_batches > 1 ? k_slice : ld_m * kM);
  StrideB dB = cute::make_stride(ld_n, cute::Int<1>{}, k_batches > 1 ? k_slice : ld_n * kN);
  StrideD dD{};
  if constexpr (swapped) {
    dD = cute::make_stride(cute::Int<1>{}, s.ldd, s.ldd * s.M);  // Dᵀ[N, M] column-major
  } else {
    dD = cute::make_stride(s.ldd, cute::Int<1>{}, s.ldd * s.M);
  }
  StrideC dC = dD;

  cutlass::KernelHardwareInfo hw;
  hw.device_id = device;
  hw.sm_count = budget;
  hw.max_active_clusters = std::min(max_clusters, budget / (info.cluster_m * info.cluster_n));

  using Scheduler = typename GemmKernel::TileScheduler;
  using RasterOptions = typename Scheduler::RasterOrderOptions;
  typename Scheduler::Arguments sched{};
  sched.max_swizzle_size = opt.swizzle;
  sched.raster_order = opt.raster == Raster::along_m   ? RasterOptions::AlongM
                       : opt.raster == Raster::along_n ? RasterOptions::AlongN
                                                       : RasterOptions::Heuristic;
  if constexpr (info.schedule == GemmSchedule::sk) {
    using Mode = typename Scheduler::DecompositionMode;
    TL_REQUIRE(opt.decomposition != Decomposition::split_k || (opt.splits >= 2 && opt.splits <= kMaxSplits),
               "gemm[", who, "]: split_k needs 2..", kMaxSplits, " splits, got ", opt.splits);
    sched.splits = opt.decomposition == Decomposition::split_k ? opt.splits : 1;
    sched.decomposition_mode = opt.decomposition == Decomposition::split_k    ? Mode::SplitK
                               : opt.decomposition == Decomposition::stream_k ? Mode::StreamK
                                                                              : Mode::DataParallel;
    sched.reduction_mode = Scheduler::ReductionMode::Deterministic;  // bitwise-repeatable results
    if (k_batches > 1) {  // split_k_reduce: whole tiles of each slice
      sched.splits = 1;
      sched.decomposition_mode = Mode::DataParallel;
    }
  } else {
    const bool batched_slices = k_batches > 1 && opt.decomposition == Decomposition::split_k_reduce;
    TL_REQUIRE(opt.decomposition == Decomposition::data_parallel || batched_slices, "gemm[", who, "]: ",
               decomposition_name(opt.decomposition), " needs an `sk` config");
    sched.hooks = hooks;
  }

  typename GemmKernel::MainloopArguments mainloop{};
  mainloop.ptr_A = static_cast<const E*>(swapped ? B : A);
  mainloop.dA = dA;
  mainloop.ptr_B = static_cast<const E*>(swapped ? A : B);
  mainloop.dB = dB;
  mainloop.hooks = hooks;

  typename GemmKernel::EpilogueArguments epilogue{};
  epilogue.thread.alpha = 1.0f;
  epilogue.thread.beta = 0.0f;
  epilogue.ptr_C = nullptr;
  epilogue.dC = dC;
  epilogue.ptr_D = static_cast<ED*>(D);
  epilogue.dD = dD;
  epilogue.hooks = hooks;

  return typename GemmKernel::Arguments{k_batches > 1 ? cutlass::gemm::GemmUniversalMode::kBatched
                                                       : cutlass::gemm::GemmUniversalMode::kGemm,
                                        {static_cast<int>(kM), static_cast<int>(kN), static_cast<int>(k_slice),
                                         k_batches},
                                        mainloop,
                                        epilogue,
                                        hw,
                                        sched};
}

// The device, the SM budget and the clusters that fit, checked against the config.
struct LaunchSite {
  int device, budget, max_clusters;
};
template <class Element, class Hooks, GemmConfig C, class Out = Element>
LaunchSite launch_site(const GemmLaunchOptions& opt) {
  constexpr GemmConfigInfo info = config_info(C);
  const int device = current_device_or_throw(info.name);
  const int device_sms = device_sm_count(device);
  const int budget = opt.sm_budget > 0 && opt.sm_budget < device_sms ? opt.sm_budget : device_sms;
  TL_REQUIRE(budget >= info.cluster_m * info.cluster_n, "gemm[", info.name, "]: sm_budget ", opt.sm_budget,
             " is smaller than one cluster (", info.cluster_m * info.cluster_n, " SMs)");
  TL_REQUIRE(opt.swizzle == 1 || opt.swizzle == 2 || opt.swizzle == 4 || opt.swizzle == 8, "gemm[", info.name,
             "]: swizzle must be 1, 2, 4 or 8, got ", opt.swizzle);
  // Set up when the Context was created (prepare_kernels); else now, at the first launch.
  return {device, budget, setup_kernel_on<Element, Hooks, C, Out>(device)};
}

// split_k_reduce: slices of whole 8-element (16-byte) steps (k_slices), at least one step each;
// the partial sums are fp32 [splits][M][N].
inline void check_reduce_splits(const GemmShape& s, int splits, const char* who) {
  TL_REQUIRE(splits >= 2 && splits <= kMaxSplits, "gemm[", who, "]: split_k_reduce needs 2..", kMaxSplits,
             " splits, got ", splits);
  TL_REQUIRE(s.K >= 8 * int64_t(splits), "gemm[", who, "]: split_k_reduce in ", splits, " slices needs K (", s.K,
             ") >= 8 x splits");
}
inline size_t partial_sums_bytes(const GemmShape& s, int splits) {
  return (size_t(splits) * size_t(s.M) * size_t(s.N) * sizeof(float) + 255) / 256 * 256;
}

// Bytes of scratch a plain launch needs (gemm_workspace_bytes dispatches here).
template <class Element, GemmConfig C>
size_t workspace_bytes_of(const GemmShape& shape, const GemmLaunchOptions& opt) {
  const GemmShape s = packed(shape);
  if (s.M == 0 || s.N == 0) return 0;
  if (opt.decomposition == Decomposition::split_k_reduce) {
    check_reduce_splits(s, opt.splits, config_info(C).name);
    const GemmShape p{s.M, s.N, s.K, s.lda, s.ldb, s.N};
    const LaunchSite site = launch_site<Element, NoHooks, C, float>(opt);
    const auto arguments = make_arguments<Element, NoHooks, C, float>(
        p, nullptr, nullptr, nullptr, NoHooks{}, opt, site.device, site.budget, site.max_clusters, opt.splits);
    return partial_sums_bytes(s, opt.splits) + Kernel<Element, NoHooks, C, float>::GemmKernel::get_workspace_size(arguments);
  }
  const LaunchSite site = launch_site<Element, NoHooks, C>(opt);
  const auto arguments = make_arguments<Element, NoHooks, C>(s, nullptr, nullptr, nullptr, NoHooks{}, opt,
                                                             site.device, site.budget, site.max_clusters);
  return Kernel<Element, NoHooks, C>::GemmKernel::get_workspace_size(arguments);
}

// One launch of the kernel (Element, Hooks, C, Out) on a packed shape; CUTLASS's own scratch (if
// any) at `scratch`, which holds `scratch_bytes`.
template <class Element, class Hooks, GemmConfig C, class Out>
void launch_kernel(const GemmShape& s, const void* A, const void* B, void* D, const Hooks& hooks,
                   const GemmLaunchOptions& opt, int k_batches, char* scratch, size_t scratch_bytes,
                   cudaStream_t stream) {
  using GemmKernel = typename Kernel<Element, Hooks, C, Out>::GemmKernel;
  constexpr GemmConfigInfo info = config_info(C);
  const char* who = info.name;
  const LaunchSite site = launch_site<Element, Hooks, C, Out>(opt);
  const auto arguments = make_arguments<Element, Hooks, C, Out>(s, A, B, D, hooks, opt, site.device, site.budget,
                                                                site.max_clusters, k_batches);
  TL_REQUIRE(GemmKernel::can_implement(arguments), "gemm[", who, "]: CUTLASS can_implement rejected M=", s.M,
             " N=", s.N, " K=", s.K, " lda=", s.lda, " ldb=", s.ldb, " ldd=", s.ldd, " batches=", k_batches);
  const size_t ws_bytes = GemmKernel::get_workspace_size(arguments);
  TL_REQUIRE(ws_bytes <= scratch_bytes, "gemm[", who, "]: CUTLASS needs ", ws_bytes, " bytes of workspace, ",
             scratch_bytes, " planned");
  if (ws_bytes > 0) {
    TL_REQUIRE(GemmKernel::initialize_workspace(arguments, scratch, stream) == cutlass::Status::kSuccess, "gemm[",
               who, "]: CUTLASS initialize_workspace failed");
  }
  const typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(arguments, scratch);
  const dim3 grid = GemmKernel::get_grid_shape(params);
  const dim3 block = GemmKernel::get_block_shape();
  constexpr int smem_bytes = GemmKernel::SharedStorageSize;
  // Only the plain GEMM overlaps its predecessor: a fused op's kernels coordinate through
  // signals and their own stream order.
  const bool overlap = std::is_same_v<Hooks, NoHooks> && kKernelsWaitForPreviousGrid && opt.overlap_previous;
  const ClusterLaunch launch(info.cluster_m, info.cluster_n, grid, block, smem_bytes, stream, overlap);
  const cudaError_t e = cudaLaunchKernelEx(&launch.cfg, &cutlass::device_kernel<GemmKernel>, params);
  TL_REQUIRE(e == cudaSuccess, "gemm[", who, "]: launch failed (grid ", grid.x, "x", grid.y, "x", grid.z,
             ", ", smem_bytes, " B smem): ", cudaGetErrorString(e));
}

template <class T>
constexpr DType dtype_of() {
  return std::is_same_v<T, __half> ? DType::fp16 : DType::bf16;
}

// split_k_reduce: the slices' fp32 partial sums in one batched launch, then one pass sums them
// into D in a fixed order (split_reduce.cu). Instantiated next to the plain configs' kernels.
template <class Element, GemmConfig C>
void launch_split_k_reduce(const GemmShape& s, const GemmArgs<Element>& args, const GemmLaunchOptions& opt,
                           cudaStream_t stream) {
  const char* who = config_info(C).name;
  check_reduce_splits(s, opt.splits, who);
  const size_t partial_bytes = partial_sums_bytes(s, opt.splits);
  const size_t bytes = workspace_bytes_of<Element, C>(s, opt);
  const LaunchWorkspace ws(bytes, opt.workspace, opt.workspace_bytes, stream, who);
  char* base = static_cast<char*>(ws.get());
  float* partials = reinterpret_cast<float*>(base);
  const GemmShape p{s.M, s.N, s.K, s.lda, s.ldb, s.N};
  launch_kernel<Element, NoHooks, C, float>(p, args.A, args.B, partials, NoHooks{}, opt, opt.splits,
                                            base + partial_bytes, bytes - partial_bytes, stream);
  const KSlices cut = k_slices(s.K, opt.splits);
  const KTail tail{args.A, args.B, s.lda, s.ldb, s.K - cut.tail, cut.tail};
  launch_split_reduce(dtype_of<Element>(), partials, opt.splits, s.M, s.N, args.D, s.ldd, tail,
                      opt.overlap_previous, stream);
}

}  // namespace detail

template <class Element, class Hooks, GemmConfig C>
void gemm_launch(const GemmArgs<Element>& args_in, const Hooks& hooks, const GemmLaunchOptions& opt,
                 cudaStream_t stream) {
  static_assert(detail::is_gemm_element<Element>::value, "gemm: Element must be __nv_bfloat16 or __half");
  constexpr GemmConfigInfo info = config_info(C);
  const char* who = info.name;

  const GemmShape s = packed(args_in.shape);
  validate(s, args_in.A, args_in.B, args_in.D, who);
  if (s.M == 0 || s.N == 0) return;  // nothing to compute, nothing launched

  if (opt.decomposition == Decomposition::split_k_reduce) {
    // Only `plain` configs have their fp32-partials kernel compiled (TILELINK_GEMM_WORKSPACE_INSTANTIATE).
    if constexpr (info.set == GemmConfigSet::plain && std::is_same_v<Hooks, NoHooks>) {
      return detail::launch_split_k_reduce<Element, C>(s, args_in, opt, stream);
    } else {
      ::tilelink::detail::fail("gemm[", who, "]: split_k_reduce needs a `plain` config");
    }
  }
  using GemmKernel = typename detail::Kernel<Element, Hooks, C>::GemmKernel;
  const detail::LaunchSite site = detail::launch_site<Element, Hooks, C>(opt);
  const auto arguments = detail::make_arguments<Element, Hooks, C>(s, args_in.A, args_in.B, args_in.D, hooks, opt,
                                                                   site.device, site.budget, site.max_clusters);
  const size_t ws_bytes = GemmKernel::get_workspace_size(arguments);
  const detail::LaunchWorkspace ws(ws_bytes, opt.workspace, opt.workspace_bytes, stream, who);
  detail::launch_kernel<Element, Hooks, C, Element>(s, args_in.A, args_in.B, args_in.D, hooks, opt, 1,
                                                    static_cast<char*>(ws.get()), ws_bytes, stream);
}

}  // namespace tilelink::gemm

// Instantiates one compiled kernel for (Element, Hooks, config name). One per .cu file is best:
// the build then compiles configs in parallel. It also registers the kernel's one-time setup with
// prepare_kernels.
#define TILELINK_GEMM_INSTANTIATE(ELEMENT, HOOKS, CONFIG)                                         \
  template void ::tilelink::gemm::gemm_launch<ELEMENT, HOOKS, ::tilelink::gemm::GemmConfig::CONFIG>( \
      const ::tilelink::gemm::GemmArgs<ELEMENT>&, const HOOKS&, const ::tilelink::gemm::GemmLaunchOptions&, \
      cudaStream_t);                                                                              \
  namespace {                                                                                     \
  [[maybe_unused]] const bool tilelink_gemm_setup_registered =                                    \
      ::tilelink::gemm::detail::register_kernel_setup(                                            \
          &::tilelink::gemm::detail::setup_kernel<ELEMENT, HOOKS, ::tilelink::gemm::GemmConfig::CONFIG>); \
  }

// Instantiates the workspace query of a `plain` config (gemm_workspace_bytes), next to its
// NoHooks kernel, and registers the setup of its fp32-partials kernel (split_k_reduce).
#define TILELINK_GEMM_WORKSPACE_INSTANTIATE(ELEMENT, CONFIG)                                          \
  template size_t ::tilelink::gemm::detail::workspace_bytes_of<ELEMENT, ::tilelink::gemm::GemmConfig::CONFIG>( \
      const ::tilelink::gemm::GemmShape&, const ::tilelink::gemm::GemmLaunchOptions&);             \
  namespace {                                                                                     \
  [[maybe_unused]] const bool tilelink_gemm_partials_setup_registered =                           \
      ::tilelink::gemm::detail::register_kernel_setup(                                            \
          &::tilelink::gemm::detail::setup_kernel<ELEMENT, ::tilelink::gemm::NoHooks,             \
                                                  ::tilelink::gemm::GemmConfig::CONFIG, float>);  \
  }
