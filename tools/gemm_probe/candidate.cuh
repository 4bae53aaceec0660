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

// `Collective` with its B operand laid out in shared memory by `AtomB`.
template <class Collective, class AtomB>
struct WithSmemAtomB;
template <class DP, class TS, class EA, class SA, class EB, class SB, class TM, class GA, class LA, class CA, class TA,
          class GB, class LB, class CB, class TB, class AtomB>
struct WithSmemAtomB<
    cutlass::gemm::collective::CollectiveMma<DP, TS, EA, SA, EB, SB, TM, GA, LA, CA, TA, GB, LB, CB, TB>, AtomB> {
  using type = cutlass::gemm::collective::CollectiveMma<DP, TS, EA, SA, EB, SB, TM, GA, LA, CA, TA, GB, AtomB, CB, TB>;
};

// EpiN: the epilogue's store step in columns (0: CUTLASS's choice, gcd(32, TileN) — 16 for widths
// that are odd multiples of 16, 8 for the other multiples of 8; else a divisor of TileN that is a
// multiple of 16). Direct: CUTLASS's epilogue without shared memory (NoSmemWarpSpecialized: each
// thread stores its accumulators straight to global memory).
// A TileN that is not a multiple of 16 does not compile with the builder's B layout (a 128-byte
// swizzle, which repeats every 16 rows of 64 columns: a stage of an odd multiple of 8 rows ends
// mid-period and slicing it fails a divisibility check), so such a candidate's B is laid out
// without a swizzle (GMMA's interleaved 8x8 core matrices).
template <int TileM, int TileN, int ClusterM, int ClusterN, bool Cooperative, bool Swapped, int EpiN = 0,
          bool Direct = false>
struct CandidateKernel {
  using E = cutlass::bfloat16_t;
  using Tile = cute::Shape<cute::Int<TileM>, cute::Int<TileN>, cute::_64>;
  using Cluster = cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>;
  using MainloopSchedule = cute::conditional_t<Cooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                               cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using TmaEpilogueSchedule = cute::conditional_t<Cooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                                  cutlass::epilogue::TmaWarpSpecialized>;
  using EpilogueSchedule = cute::conditional_t<Direct, cutlass::epilogue::NoSmemWarpSpecialized, TmaEpilogueSchedule>;
  using LayoutD = cute::conditional_t<Swapped, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static_assert(EpiN == 0 || (EpiN % 16 == 0 && TileN % (EpiN ? EpiN : 16) == 0),
                "EpiN: a multiple of 16 dividing TileN");
  using SetEpilogueTile = cute::Shape<cute::Int<Cooperative ? 128 : 64>, cute::Int<(EpiN ? EpiN : 16)>>;
  using EpilogueTile = cute::conditional_t<EpiN == 0, cutlass::epilogue::collective::EpilogueTileAuto, SetEpilogueTile>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, EpilogueTile, float, float, void,
      cutlass::layout::RowMajor, 8, E, LayoutD, 8, EpilogueSchedule>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, E, cutlass::layout::RowMajor, 8, E,
      cutlass::layout::ColumnMajor, 8, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;
  using UnswizzledB = typename WithSmemAtomB<Mainloop, cute::GMMA::Layout_K_INTER_Atom<E>>::type;
  using MainloopOfWidth = cute::conditional_t<TileN % 16 == 0, Mainloop, UnswizzledB>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, MainloopOfWidth, Epilogue>;
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
#define TILELINK_PROBE_CANDIDATE(NAME, TM, TN, CM, CN, SCHEDULE, OPERANDS) \
  TILELINK_PROBE_REGISTER(NAME, TM, TN, CM, CN, SCHEDULE, OPERANDS, 0, false)
// ..._DIRECT: the same with the epilogue that stores from registers (no shared memory, no TMA).
#define TILELINK_PROBE_CANDIDATE_DIRECT(NAME, TM, TN, CM, CN, SCHEDULE, OPERANDS) \
  TILELINK_PROBE_REGISTER(NAME, TM, TN, CM, CN, SCHEDULE, OPERANDS, 0, true)
// ..._EPI: the same with the epilogue's store step set (EpiN columns). CUTLASS's epilogue builder
// sizes the fragment its fusion callbacks take as the step's elements per thread (24 for a 64x48
// step), which its register-to-shared copy cannot split unless a power of two; the candidate's
// dispatch policy is the builder's own with fragments of 8 (what a 16-column step gets).
#define TILELINK_PROBE_SCHEDULE_TYPE_pingpong ::cutlass::epilogue::TmaWarpSpecialized
#define TILELINK_PROBE_SCHEDULE_TYPE_cooperative ::cutlass::epilogue::TmaWarpSpecializedCooperative
#define TILELINK_PROBE_EPI_M_pingpong 64
#define TILELINK_PROBE_EPI_M_cooperative 128
#define TILELINK_PROBE_CANDIDATE_EPI(NAME, TM, TN, CM, CN, SCHEDULE, OPERANDS, EPI_N)                           \
  namespace cutlass::epilogue::collective::detail {                                                            \
  template <>                                                                                                  \
  constexpr auto sm90_get_tma_dispatch_policy<                                                                 \
      cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::_64>,                                                   \
      cute::Shape<cute::Int<TILELINK_PROBE_EPI_M_##SCHEDULE>, cute::Int<EPI_N>>, void, cutlass::bfloat16_t,    \
      TILELINK_PROBE_SCHEDULE_TYPE_##SCHEDULE>() {                                                              \
    constexpr int steps = (TM / TILELINK_PROBE_EPI_M_##SCHEDULE) * (TN / EPI_N);                               \
    return Sm90TmaWarpSpecialized<(steps < 4 ? steps : 4), (steps < 2 ? steps : 2), 8, false, true>{};         \
  }                                                                                                            \
  }                                                                                                            \
  TILELINK_PROBE_REGISTER(NAME, TM, TN, CM, CN, SCHEDULE, OPERANDS, EPI_N, false)
#define TILELINK_PROBE_REGISTER(NAME, TM, TN, CM, CN, SCHEDULE, OPERANDS, EPI_N, DIRECT)                        \
  namespace {                                                                                                  \
  using NAME##_kernel = ::tilelink::probe::CandidateKernel<TM, TN, CM, CN, TILELINK_PROBE_SCHEDULE_##SCHEDULE, \
                                                           TILELINK_PROBE_OPERANDS_##OPERANDS, EPI_N, DIRECT>;\
  const ::tilelink::probe::Register NAME##_registered{                                                         \
      {#NAME, &NAME##_kernel::run, &NAME##_kernel::workspace_bytes}};                                          \
  }
