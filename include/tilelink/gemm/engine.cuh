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

template <GemmSchedule S>
struct schedule_types;
template <>
struct schedule_types<GemmSchedule::coop> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
  static constexpr int kEpiM = 128;
};
template <>
struct schedule_types<GemmSchedule::pp> {
  using Kernel = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
  static constexpr int kEpiM = 64;
};

template <GemmConfig C>
struct ConfigTraits {
  static constexpr GemmConfigInfo kInfo = config_info(C);
  using TileShape = cute::Shape<cute::Int<kInfo.tile_m>, cute::Int<kInfo.tile_n>, cute::Int<kInfo.tile_k>>;
  using ClusterShape = cute::Shape<cute::Int<kInfo.cluster_m>, cute::Int<kInfo.cluster_n>, cute::_1>;
  using Sched = schedule_types<kInfo.schedule>;
  using EpilogueTile = cute::conditional_t<kInfo.epi_n == 0, cutlass::epilogue::collective::EpilogueTileAuto,
                                           cute::Shape<cute::Int<Sched::kEpiM>, cute::Int<(kInfo.epi_n ? kInfo.epi_n : 16)>>>;
};

template <class ElementIn, class Hooks, GemmConfig C>
struct Kernel {
  using Element = typename cutlass_element<ElementIn>::type;
  using Traits = ConfigTraits<C>;
  using TileShape = typename Traits::TileShape;
  using ClusterShape = typename Traits::ClusterShape;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;  // 16 B for TMA

  using BaseEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      typename Traits::EpilogueTile, float, float,                      //
      void, cutlass::layout::RowMajor, kAlign,                          // no C operand
      Element, cutlass::layout::RowMajor, kAlign,                       // D
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
                                                          HookedSchedulerTag<Hooks>>;
};

// A cluster launch: the config and its one attribute live together (cfg.attrs points into it).
struct ClusterLaunch {
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  ClusterLaunch(int cluster_m, int cluster_n, dim3 grid, dim3 block, int smem_bytes, cudaStream_t stream) {
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cluster_m;
    attr.val.clusterDim.y = cluster_n;
    attr.val.clusterDim.z = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem_bytes;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
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

int current_device_or_throw(const char* who);
int device_sm_count(int device);

template <class Element, class Hooks, GemmConfig C>
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

template <class Element, class Hooks, GemmConfig C>
int setup_kernel_on(int device) {
  using GemmKernel = typename Kernel<Element, Hooks, C>::GemmKernel;
  constexpr GemmConfigInfo info = config_info(C);
  const ClusterKernel k{reinterpret_cast<const void*>(&cutlass::device_kernel<GemmKernel>),
                        int(GemmKernel::SharedStorageSize), info.cluster_m, info.cluster_n,
                        GemmKernel::get_block_shape(), "gemm", info.name};
  return setup_cluster_kernel_on(k, device_once<Element, Hooks, C>(), device);
}

template <class Element, class Hooks, GemmConfig C>
void setup_kernel(int device) {
  setup_kernel_on<Element, Hooks, C>(device);
}

}  // namespace detail

template <class Element, class Hooks, GemmConfig C>
void gemm_launch(const GemmArgs<Element>& args_in, const Hooks& hooks, const GemmLaunchOptions& opt,
                 cudaStream_t stream) {
  static_assert(detail::is_gemm_element<Element>::value, "gemm: Element must be __nv_bfloat16 or __half");
  using K = detail::Kernel<Element, Hooks, C>;
  using GemmKernel = typename K::GemmKernel;
  using E = typename K::Element;
  constexpr GemmConfigInfo info = config_info(C);
  const char* who = info.name;

  const GemmShape s = packed(args_in.shape);
  validate(s, args_in.A, args_in.B, args_in.D, who);
  if (s.M == 0 || s.N == 0) return;  // nothing to compute, nothing launched

  const int device = detail::current_device_or_throw(who);
  const int device_sms = detail::device_sm_count(device);
  const int budget = opt.sm_budget > 0 && opt.sm_budget < device_sms ? opt.sm_budget : device_sms;
  constexpr int cluster_size = info.cluster_m * info.cluster_n;
  TL_REQUIRE(budget >= cluster_size, "gemm[", who, "]: sm_budget ", opt.sm_budget,
             " is smaller than one cluster (", cluster_size, " SMs)");
  TL_REQUIRE(opt.swizzle == 1 || opt.swizzle == 2 || opt.swizzle == 4 || opt.swizzle == 8, "gemm[", who,
             "]: swizzle must be 1, 2, 4 or 8, got ", opt.swizzle);

  // Set up when the Context was created (prepare_kernels); else now, at the first launch.
  const int max_clusters = detail::setup_kernel_on<Element, Hooks, C>(device);
  auto kernel_fn = &cutlass::device_kernel<GemmKernel>;
  constexpr int smem_bytes = GemmKernel::SharedStorageSize;

  using StrideA = typename GemmKernel::StrideA;
  using StrideB = typename GemmKernel::StrideB;
  using StrideC = typename GemmKernel::StrideC;
  using StrideD = typename GemmKernel::StrideD;
  StrideA dA = cute::make_stride(s.lda, cute::Int<1>{}, s.lda * s.M);
  StrideB dB = cute::make_stride(s.ldb, cute::Int<1>{}, s.ldb * s.N);
  StrideD dD = cute::make_stride(s.ldd, cute::Int<1>{}, s.ldd * s.M);
  StrideC dC = dD;

  cutlass::KernelHardwareInfo hw;
  hw.device_id = device;
  hw.sm_count = budget;
  hw.max_active_clusters = std::min(max_clusters, budget / cluster_size);

  using RasterOptions = typename GemmKernel::TileScheduler::RasterOrderOptions;
  typename GemmKernel::TileScheduler::Arguments sched{};
  sched.max_swizzle_size = opt.swizzle;
  sched.raster_order = opt.raster == Raster::along_m   ? RasterOptions::AlongM
                       : opt.raster == Raster::along_n ? RasterOptions::AlongN
                                                       : RasterOptions::Heuristic;
  sched.hooks = hooks;

  typename GemmKernel::MainloopArguments mainloop{};
  mainloop.ptr_A = reinterpret_cast<const E*>(args_in.A);
  mainloop.dA = dA;
  mainloop.ptr_B = reinterpret_cast<const E*>(args_in.B);
  mainloop.dB = dB;
  mainloop.hooks = hooks;

  typename GemmKernel::EpilogueArguments epilogue{};
  epilogue.thread.alpha = 1.0f;
  epilogue.thread.beta = 0.0f;
  epilogue.ptr_C = nullptr;
  epilogue.dC = dC;
  epilogue.ptr_D = reinterpret_cast<E*>(args_in.D);
  epilogue.dD = dD;
  epilogue.hooks = hooks;

  typename GemmKernel::Arguments arguments{cutlass::gemm::GemmUniversalMode::kGemm,
                                           {static_cast<int>(s.M), static_cast<int>(s.N), static_cast<int>(s.K), 1},
                                           mainloop,
                                           epilogue,
                                           hw,
                                           sched};

  TL_REQUIRE(GemmKernel::can_implement(arguments), "gemm[", who, "]: CUTLASS can_implement rejected M=", s.M,
             " N=", s.N, " K=", s.K, " lda=", s.lda, " ldb=", s.ldb, " ldd=", s.ldd);
  TL_REQUIRE(GemmKernel::get_workspace_size(arguments) == 0, "gemm[", who, "]: unexpected workspace");

  const typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(arguments, nullptr);
  const dim3 grid = GemmKernel::get_grid_shape(params);
  const dim3 block = GemmKernel::get_block_shape();

  const detail::ClusterLaunch launch(info.cluster_m, info.cluster_n, grid, block, smem_bytes, stream);
  const cudaError_t e = cudaLaunchKernelEx(&launch.cfg, kernel_fn, params);
  TL_REQUIRE(e == cudaSuccess, "gemm[", who, "]: launch failed (grid ", grid.x, "x", grid.y, "x", grid.z,
             ", ", smem_bytes, " B smem): ", cudaGetErrorString(e));
}

}  // namespace tilelink::gemm

// Instantiates one compiled kernel for (Element, Hooks, config name). One per .cu file is best:
// the build then compiles configs in parallel.
// It also registers the kernel's one-time setup with prepare_kernels.
#define TILELINK_GEMM_INSTANTIATE(ELEMENT, HOOKS, CONFIG)                                         \
  template void ::tilelink::gemm::gemm_launch<ELEMENT, HOOKS, ::tilelink::gemm::GemmConfig::CONFIG>( \
      const ::tilelink::gemm::GemmArgs<ELEMENT>&, const HOOKS&, const ::tilelink::gemm::GemmLaunchOptions&, \
      cudaStream_t);                                                                              \
  namespace {                                                                                     \
  [[maybe_unused]] const bool tilelink_gemm_setup_registered =                                    \
      ::tilelink::gemm::detail::register_kernel_setup(                                            \
          &::tilelink::gemm::detail::setup_kernel<ELEMENT, HOOKS, ::tilelink::gemm::GemmConfig::CONFIG>); \
  }
