// tilelink/gemm/grouped_engine.cuh — assembly and launch of the grouped GEMM kernels. Include
// ONLY from .cu files that instantiate them (TILELINK_GROUPED_GEMM_INSTANTIATE); everybody else
// includes grouped.hpp.
//
// One launch = a small kernel that turns the device-side segment bounds into CUTLASS's
// per-group arguments (problem shape, operand pointers, strides — in the caller's workspace),
// then the persistent pointer-array kernel, which reads them on the device.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "tilelink/gemm/engine.cuh"
#include "tilelink/gemm/grouped.hpp"
#include "tilelink/gemm/grouped_collectives.cuh"

namespace tilelink::gemm::detail {

template <GroupedConfig C>
struct GroupedTraits;
template <>
struct GroupedTraits<GroupedConfig::coop_128x256_c2x1> {
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;
  using Kernel = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
  static constexpr const char* kName = "grouped_coop_128x256_c2x1";
};
template <>
struct GroupedTraits<GroupedConfig::pp_64x128_c1x2> {
  using TileShape = cute::Shape<cute::_64, cute::_128, cute::_128>;
  using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;
  using Kernel = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
  static constexpr const char* kName = "grouped_pp_64x128_c1x2";
};

template <class ElementIn, class Hooks, GroupedConfig C>
struct GroupedKernel {
  using Element = typename cutlass_element<ElementIn>::type;
  using Traits = GroupedTraits<C>;
  using TileShape = typename Traits::TileShape;
  using ClusterShape = typename Traits::ClusterShape;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;

  using BaseEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,  //
      void, cutlass::layout::RowMajor*, kAlign,                       // no C operand
      Element, cutlass::layout::RowMajor*, kAlign,                    // D
      typename Traits::Epilogue>::CollectiveOp;

  using BaseMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,  //
      Element, cutlass::layout::RowMajor*, kAlign,           // A: rows x K
      Element, cutlass::layout::ColumnMajor*, kAlign,        // B: stored N x K
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename BaseEpilogue::SharedStorage))>,
      typename Traits::Kernel>::CollectiveOp;

  using Mainloop = HookedArrayMainloop<BaseMainloop, Hooks>;
  using Epilogue = HookedArrayEpilogue<BaseEpilogue, Hooks>;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;

  using UnderlyingShape = typename ProblemShape::UnderlyingProblemShape;
  using StrideA = cute::remove_pointer_t<typename GemmKernel::StrideA>;
  using StrideB = cute::remove_pointer_t<typename GemmKernel::StrideB>;
  using StrideD = cute::remove_pointer_t<typename GemmKernel::StrideD>;
};

// The per-group arguments, carved from the caller's workspace after CUTLASS's own part.
template <class K>
struct GroupedArrays {
  typename K::UnderlyingShape* problems;
  const typename K::Element** ptr_a;
  const typename K::Element** ptr_b;
  typename K::Element** ptr_d;
  typename K::StrideA* stride_a;
  typename K::StrideB* stride_b;
  typename K::StrideD* stride_d;

  static size_t align(size_t x) { return (x + 127) / 128 * 128; }
  static size_t bytes(int32_t groups) {
    const size_t g = size_t(groups);
    return align(g * sizeof(typename K::UnderlyingShape)) + 3 * align(g * sizeof(void*)) +
           align(g * sizeof(typename K::StrideA)) + align(g * sizeof(typename K::StrideB)) +
           align(g * sizeof(typename K::StrideD));
  }
  static GroupedArrays carve(char* p, int32_t groups) {
    const size_t g = size_t(groups);
    GroupedArrays a;
    a.problems = reinterpret_cast<typename K::UnderlyingShape*>(p);
    p += align(g * sizeof(typename K::UnderlyingShape));
    a.ptr_a = reinterpret_cast<const typename K::Element**>(p);
    p += align(g * sizeof(void*));
    a.ptr_b = reinterpret_cast<const typename K::Element**>(p);
    p += align(g * sizeof(void*));
    a.ptr_d = reinterpret_cast<typename K::Element**>(p);
    p += align(g * sizeof(void*));
    a.stride_a = reinterpret_cast<typename K::StrideA*>(p);
    p += align(g * sizeof(typename K::StrideA));
    a.stride_b = reinterpret_cast<typename K::StrideB*>(p);
    p += align(g * sizeof(typename K::StrideB));
    a.stride_d = reinterpret_cast<typename K::StrideD*>(p);
    return a;
  }
};

template <class K>
struct GroupedSetupParams {
  GroupedArrays<K> out;
  const typename K::Element* a;
  const typename K::Element* b;
  typename K::Element* d;
  const int32_t* group_end;
  const int32_t* group_weight;
  int32_t num_groups, num_weights;
  int64_t n, k, max_rows;
};

// One thread per group: the segment [end[g-1], end[g]) clipped to [0, max_rows]; a weight
// index out of range empties the group.
template <class K>
__global__ void grouped_setup_kernel(GroupedSetupParams<K> p) {
  const int32_t g = int32_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (g >= p.num_groups) return;
  auto clip = [&](int64_t row) { return row < 0 ? int64_t(0) : (row > p.max_rows ? p.max_rows : row); };
  const int64_t begin = g == 0 ? 0 : clip(p.group_end[g - 1]);
  int64_t end = clip(p.group_end[g]);
  int32_t w = p.group_weight ? p.group_weight[g] : g;
  if (w < 0 || w >= p.num_weights) {
    w = 0;
    end = begin;
  }
  if (end < begin) end = begin;
  p.out.problems[g] = cute::make_shape(int(end - begin), int(p.n), int(p.k));
  p.out.ptr_a[g] = p.a + begin * p.k;
  p.out.ptr_b[g] = p.b + int64_t(w) * p.n * p.k;
  p.out.ptr_d[g] = p.d + begin * p.n;
  // Row-major A and D, B stored N x K: only the leading stride is dynamic.
  typename K::StrideA sa{};
  typename K::StrideB sb{};
  typename K::StrideD sd{};
  cute::get<0>(sa) = p.k;
  cute::get<0>(sb) = p.k;
  cute::get<0>(sd) = p.n;
  p.out.stride_a[g] = sa;
  p.out.stride_b[g] = sb;
  p.out.stride_d[g] = sd;
}

template <class Element, class Hooks, GroupedConfig C>
typename GroupedKernel<Element, Hooks, C>::GemmKernel::Arguments grouped_arguments(
    const GroupedArrays<GroupedKernel<Element, Hooks, C>>& arrays, int32_t num_groups, const Hooks& hooks,
    int device, int sm_count, int max_active_clusters) {
  using K = GroupedKernel<Element, Hooks, C>;
  using GemmKernel = typename K::GemmKernel;
  typename GemmKernel::MainloopArguments mainloop{};
  mainloop.ptr_A = arrays.ptr_a;
  mainloop.dA = arrays.stride_a;
  mainloop.ptr_B = arrays.ptr_b;
  mainloop.dB = arrays.stride_b;
  mainloop.hooks = hooks;
  typename GemmKernel::EpilogueArguments epilogue{};
  epilogue.thread.alpha = 1.0f;
  epilogue.thread.beta = 0.0f;
  epilogue.ptr_C = nullptr;
  epilogue.dC = nullptr;
  epilogue.ptr_D = arrays.ptr_d;
  epilogue.dD = arrays.stride_d;
  epilogue.hooks = hooks;
  cutlass::KernelHardwareInfo hw;
  hw.device_id = device;
  hw.sm_count = sm_count;
  hw.max_active_clusters = max_active_clusters;
  typename GemmKernel::TileScheduler::Arguments sched{};
  return typename GemmKernel::Arguments{cutlass::gemm::GemmUniversalMode::kGrouped,
                                        {num_groups, arrays.problems, nullptr},
                                        mainloop,
                                        epilogue,
                                        hw,
                                        sched};
}

template <class Element, class Hooks, GroupedConfig C>
size_t cutlass_workspace_bytes(int32_t num_groups, int sm_count) {
  using K = GroupedKernel<Element, Hooks, C>;
  const GroupedArrays<K> none{};
  const auto args = grouped_arguments<Element, Hooks, C>(none, num_groups, Hooks{}, 0, sm_count, 1);
  return GroupedArrays<K>::align(K::GemmKernel::get_workspace_size(args));
}

template <class Element, class Hooks, GroupedConfig C>
DeviceOnce& grouped_device_once() {
  static DeviceOnce once;
  return once;
}

template <class Element, class Hooks, GroupedConfig C>
int grouped_setup_kernel_on(int device) {
  using K = GroupedKernel<Element, Hooks, C>;
  using GemmKernel = typename K::GemmKernel;
  const ClusterKernel k{reinterpret_cast<const void*>(&cutlass::device_kernel<GemmKernel>),
                        int(GemmKernel::SharedStorageSize), int(cute::size<0>(typename K::ClusterShape{})),
                        int(cute::size<1>(typename K::ClusterShape{})), GemmKernel::get_block_shape(),
                        "grouped_gemm", K::Traits::kName};
  return setup_cluster_kernel_on(k, grouped_device_once<Element, Hooks, C>(), device);
}

template <class Element, class Hooks, GroupedConfig C>
void grouped_setup_kernel_registered(int device) {
  grouped_setup_kernel_on<Element, Hooks, C>(device);
}

}  // namespace tilelink::gemm::detail

namespace tilelink::gemm {

template <class Element, class Hooks, GroupedConfig C>
void grouped_gemm_launch(const GroupedGemmArgs& args, const Hooks& hooks, int sm_budget, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream) {
  using K = detail::GroupedKernel<Element, Hooks, C>;
  using GemmKernel = typename K::GemmKernel;
  using Arrays = detail::GroupedArrays<K>;
  const char* who = K::Traits::kName;
  validate_grouped(args, who);
  if (args.num_groups == 0 || args.max_rows == 0) return;

  constexpr int cluster_m = cute::size<0>(typename K::ClusterShape{});
  constexpr int cluster_n = cute::size<1>(typename K::ClusterShape{});
  constexpr int cluster_size = cluster_m * cluster_n;
  const int device = detail::current_device_or_throw(who);
  const int device_sms = detail::device_sm_count(device);
  const int budget = sm_budget > 0 && sm_budget < device_sms ? sm_budget : device_sms;
  TL_REQUIRE(budget >= cluster_size, "grouped_gemm[", who, "]: sm_budget ", sm_budget,
             " is smaller than one cluster (", cluster_size, " SMs)");
  const size_t cutlass_bytes = detail::cutlass_workspace_bytes<Element, Hooks, C>(args.num_groups, budget);
  const size_t need = cutlass_bytes + Arrays::bytes(args.num_groups);
  TL_REQUIRE(workspace != nullptr && workspace_bytes >= need && reinterpret_cast<uintptr_t>(workspace) % 128 == 0,
             "grouped_gemm[", who, "]: workspace must be 128-byte aligned and hold ", need, " bytes (got ",
             workspace_bytes, "; grouped_gemm_workspace_bytes says how much)");
  const int max_clusters = detail::grouped_setup_kernel_on<Element, Hooks, C>(device);

  char* ws = static_cast<char*>(workspace);
  const Arrays arrays = Arrays::carve(ws + cutlass_bytes, args.num_groups);
  detail::GroupedSetupParams<K> setup{arrays,
                                      static_cast<const typename K::Element*>(args.A),
                                      static_cast<const typename K::Element*>(args.B),
                                      static_cast<typename K::Element*>(args.D),
                                      args.group_end,
                                      args.group_weight,
                                      args.num_groups,
                                      args.num_weights,
                                      args.N,
                                      args.K,
                                      args.max_rows};
  detail::grouped_setup_kernel<K><<<(args.num_groups + 127) / 128, 128, 0, stream>>>(setup);
  TL_CUDA_CHECK(cudaGetLastError());

  const auto arguments = detail::grouped_arguments<Element, Hooks, C>(arrays, args.num_groups, hooks, device, budget,
                                                                      std::min(max_clusters, budget / cluster_size));
  TL_REQUIRE(GemmKernel::can_implement(arguments), "grouped_gemm[", who, "]: CUTLASS can_implement rejected N=",
             args.N, " K=", args.K, " groups=", args.num_groups);
  TL_REQUIRE(GemmKernel::get_workspace_size(arguments) <= cutlass_bytes, "grouped_gemm[", who,
             "]: CUTLASS workspace larger than planned");
  TL_REQUIRE(GemmKernel::initialize_workspace(arguments, ws, stream) == cutlass::Status::kSuccess,
             "grouped_gemm[", who, "]: CUTLASS initialize_workspace failed");
  const typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(arguments, ws);
  const dim3 grid = GemmKernel::get_grid_shape(params);
  const dim3 block = GemmKernel::get_block_shape();
  constexpr int smem_bytes = GemmKernel::SharedStorageSize;
  const detail::ClusterLaunch launch(cluster_m, cluster_n, grid, block, smem_bytes, stream);
  const cudaError_t e = cudaLaunchKernelEx(&launch.cfg, &cutlass::device_kernel<GemmKernel>, params);
  TL_REQUIRE(e == cudaSuccess, "grouped_gemm[", who, "]: launch failed (grid ", grid.x, "x", grid.y, "x", grid.z,
             ", ", smem_bytes, " B smem): ", cudaGetErrorString(e));
}

template <class Element, GroupedConfig C>
size_t detail::grouped_workspace_bytes_of(int32_t num_groups, int sm_budget) {
  using K = detail::GroupedKernel<Element, NoHooks, C>;
  return detail::cutlass_workspace_bytes<Element, NoHooks, C>(num_groups, sm_budget) +
         detail::GroupedArrays<K>::bytes(num_groups);
}

}  // namespace tilelink::gemm

// Instantiates one grouped kernel for (ELEMENT, HOOKS, config) and registers its one-time setup.
#define TILELINK_GROUPED_GEMM_INSTANTIATE(ELEMENT, HOOKS, CONFIG)                                          \
  template void ::tilelink::gemm::grouped_gemm_launch<ELEMENT, HOOKS, ::tilelink::gemm::GroupedConfig::CONFIG>( \
      const ::tilelink::gemm::GroupedGemmArgs&, const HOOKS&, int, void*, size_t, cudaStream_t);           \
  namespace {                                                                                              \
  [[maybe_unused]] const bool tilelink_grouped_setup_registered =                                          \
      ::tilelink::gemm::detail::register_kernel_setup(                                                     \
          &::tilelink::gemm::detail::grouped_setup_kernel_registered<ELEMENT, HOOKS,                       \
                                                                     ::tilelink::gemm::GroupedConfig::CONFIG>); \
  }

// Instantiates the workspace-size query of one (ELEMENT, config) (grouped_gemm_workspace_bytes).
#define TILELINK_GROUPED_WORKSPACE_INSTANTIATE(ELEMENT, CONFIG)                                        \
  template size_t ::tilelink::gemm::detail::grouped_workspace_bytes_of<ELEMENT,                      \
                                                                      ::tilelink::gemm::GroupedConfig::CONFIG>(int32_t, int);
