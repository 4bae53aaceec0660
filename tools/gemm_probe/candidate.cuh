// tools/gemm_probe/candidate.cuh — a GEMM tile the engine does not have, built from the same
// CUTLASS 4.2 collectives as the engine's kernels (TMA warp-specialised mainloop, TMA epilogue,
// stages carved out beside the epilogue) with CUTLASS's own persistent tile scheduler and no
// hooks: what a config would run before it is added to the engine's list. bf16 in and out, fp32
// accumulation, D[M,N] = A[M,K] · B[N,K]ᵀ, all row-major. A swapped candidate computes
// Dᵀ = B · Aᵀ (its M over B's rows) and stores Dᵀ column-major, as the engine's `ba` configs do.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "tilelink/gemm/engine.cuh"

namespace tilelink::probe {

struct Candidate {
  std::string name;
  // Runs once on `stream`; false when CUTLASS refuses the shape.
  bool (*run)(const void* A, const void* B, void* D, int M, int N, int K, void* workspace, int sms,
              cudaStream_t stream);
  size_t (*workspace_bytes)(int M, int N, int K, int sms);
};

// Every candidate compiled in; each candidates_*.cu unit adds its own at static initialisation.
std::vector<Candidate>& candidates();
struct Register {
  explicit Register(Candidate c) { candidates().push_back(std::move(c)); }
};

template <int TileM, int TileN, int ClusterM, int ClusterN, bool Cooperative, bool Swapped>
struct CandidateKernel {
  using E = cutlass::bfloat16_t;
  using Tile = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::_64>;
  using Cluster = cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>;
  using MainloopSchedule = cute::conditional_t<Cooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                               cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using EpilogueSchedule = cute::conditional_t<Cooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                               cutlass::epilogue::TmaWarpSpecialized>;
  using LayoutD = cute::conditional_t<Swapped, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::RowMajor, 8, E, LayoutD,
      8, EpilogueSchedule>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, E, cutlass::layout::RowMajor, 8, E,
      cutlass::layout::ColumnMajor, 8, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Gemm::Arguments arguments(const void* A, const void* B, void* D, int M, int N, int K, int sms) {
    const int m = Swapped ? N : M, n = Swapped ? M : N;
    const auto* a = static_cast<const E*>(Swapped ? B : A);
    const auto* b = static_cast<const E*>(Swapped ? A : B);
    const auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(m, K, 1));
    const auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(n, K, 1));
    const auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(m, n, 1));
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {m, n, K, 1},
                                  {a, stride_a, b, stride_b},
                                  {{1.0f, 0.0f}, nullptr, stride_d, static_cast<E*>(D), stride_d}};
    args.hw_info.sm_count = sms;
    args.hw_info.max_active_clusters = max_active_clusters();
    return args;
  }
  // The clusters that fit on the device beside the kernel's shared memory, by the engine's own
  // one-time setup (CUTLASS's own estimate assumes 18-SM GPCs; its occupancy query leaves the
  // shared memory out), so that candidates and the engine's configs size their grids alike.
  static int max_active_clusters() {
    static gemm::detail::DeviceOnce once;
    const gemm::detail::ClusterKernel k{reinterpret_cast<const void*>(&cutlass::device_kernel<Kernel>),
                                        int(Kernel::SharedStorageSize), ClusterM, ClusterN,
                                        Kernel::get_block_shape(), "tilelink-gemm-probe", "candidate"};
    return gemm::detail::setup_cluster_kernel_on(k, once, gemm::detail::current_device_or_throw("tilelink-gemm-probe"));
  }
  static size_t workspace_bytes(int M, int N, int K, int sms) {
    return Gemm::get_workspace_size(arguments(nullptr, nullptr, nullptr, M, N, K, sms));
  }
  static bool run(const void* A, const void* B, void* D, int M, int N, int K, void* workspace, int sms,
                  cudaStream_t stream) {
    Gemm gemm;
    const auto args = arguments(A, B, D, M, N, K, sms);
    return gemm.can_implement(args) == cutlass::Status::kSuccess &&
           gemm.initialize(args, workspace, stream) == cutlass::Status::kSuccess &&
           gemm.run(stream) == cutlass::Status::kSuccess;
  }
};

}  // namespace tilelink::probe

// TILELINK_PROBE_CANDIDATE(pp_128x80_c2x1, 128, 80, 2, 1, pingpong|cooperative, ab|ba)
#define TILELINK_PROBE_SCHEDULE_pingpong false
#define TILELINK_PROBE_SCHEDULE_cooperative true
#define TILELINK_PROBE_OPERANDS_ab false
#define TILELINK_PROBE_OPERANDS_ba true
#define TILELINK_PROBE_CANDIDATE(NAME, TM, TN, CM, CN, SCHEDULE, OPERANDS)                                     \
  namespace {                                                                                                  \
  using NAME##_kernel = ::tilelink::probe::CandidateKernel<TM, TN, CM, CN, TILELINK_PROBE_SCHEDULE_##SCHEDULE, \
                                                           TILELINK_PROBE_OPERANDS_##OPERANDS>;               \
  const ::tilelink::probe::Register NAME##_registered{                                                         \
      {#NAME, &NAME##_kernel::run, &NAME##_kernel::workspace_bytes}};                                          \
  }
