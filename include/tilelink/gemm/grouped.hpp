// tilelink/gemm/grouped.hpp — host API of the grouped GEMM engine (no CUTLASS here).
//
//   for every group g:  D[rows_g, N] = A[rows_g, K] · B[w_g][N, K]ᵀ
//
// The groups are consecutive row segments of one A and one D (row-major, K-major operands, bf16
// or fp16, fp32 accumulation): group g owns rows [group_end[g-1], group_end[g]) (group_end[-1] = 0)
// and multiplies them by weight w_g = group_weight[g] (or g) of a stack B[num_weights, N, K].
// This is the mixture-of-experts layout (tokens sorted by expert, one weight per expert) and the
// one `torch._grouped_mm(A, B.transpose(-2, -1), offs=group_end)` takes.
//
// The segment bounds live in device memory and are read by the device only: a routing kernel can
// write them just before the GEMM, in stream order, with no host synchronisation (and a CUDA
// graph replays with new routing). Bounds that are out of range are clipped to [0, max_rows], a
// weight index out of [0, num_weights) makes its group empty: never an out-of-bounds access.
//
// The kernel is CUTLASS's sm90 pointer-array grouped GEMM (TMA, warp-specialised, persistent, its
// group tile scheduler) with the dense engine's hook contract (hooks.cuh): before_load and
// after_store see a TileCoord that names its group, with rows counted within the group. order_m
// is not used (tiles are visited in group order; order the groups instead).
//
//   GroupedGemmArgs args{DType::bf16, A, B, D, n, k, num_groups, group_end, group_weight, ...};
//   std::vector<char> ... workspace of grouped_gemm_workspace_bytes(...) device bytes
//   grouped_gemm(args, choose_grouped_config(...), sm_budget, workspace, bytes, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "tilelink/core/dtype.hpp"

namespace tilelink::gemm {

struct GroupedGemmArgs {
  DType dtype = DType::bf16;
  const void* A = nullptr;  // [max_rows, K] row-major
  const void* B = nullptr;  // [num_weights, N, K] row-major
  void* D = nullptr;        // [max_rows, N] row-major
  int64_t N = 0, K = 0;
  int32_t num_groups = 0;
  const int32_t* group_end = nullptr;     // device [num_groups]: each group's end row (nondecreasing)
  const int32_t* group_weight = nullptr;  // device [num_groups]: weight index; nullptr: group g uses weight g
  int32_t num_weights = 0;
  int64_t max_rows = 0;  // rows allocated in A and D
};

// The compiled configurations (tile_m x tile_n x tile_k, cluster). Both are the shapes the
// mixture-of-experts GEMMs of PyTorch's grouped_mm use on Hopper: large tiles while the groups
// are tall, small ping-pong tiles for short groups (decode, many experts).
enum class GroupedConfig : uint8_t {
  coop_128x256_c2x1,  // cooperative, 128x256x64, cluster 2x1
  pp_64x128_c1x2,     // ping-pong, 64x128x128, cluster 1x2
};
const char* grouped_config_name(GroupedConfig c);
struct GroupedTile {
  int tile_m, tile_n;
};
GroupedTile grouped_config_tile(GroupedConfig c);

// The rule: the small ping-pong tile when the average group is at most 128 rows, where
// 128-row tiles would be mostly padding, else the large cooperative tile. Pure; CPU-tested.
GroupedConfig choose_grouped_config(int64_t total_rows, int32_t num_groups, int64_t N, int64_t K);

// Device bytes a launch needs in `workspace` (CUTLASS's per-SM tensor maps, the per-group
// problem shapes, pointers and strides). Depends on the config, the groups and the SM budget.
size_t grouped_gemm_workspace_bytes(GroupedConfig c, int32_t num_groups, int sm_budget);

// Throws tilelink::Error naming the problem: N or K not a multiple of 8, misaligned pointers,
// num_groups or num_weights out of range, an unsupported dtype.
void validate_grouped(const GroupedGemmArgs& args, const char* who);

// One compiled kernel (grouped_engine.cuh defines it, TILELINK_GROUPED_GEMM_INSTANTIATE
// instantiates it per element, hooks and config).
template <class Element, class Hooks, GroupedConfig C>
void grouped_gemm_launch(const GroupedGemmArgs& args, const Hooks& hooks, int sm_budget, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream);

// The plain grouped GEMM (no hooks), bf16 or fp16 by args.dtype.
void grouped_gemm(const GroupedGemmArgs& args, GroupedConfig config, int sm_budget, void* workspace,
                  size_t workspace_bytes, cudaStream_t stream);

namespace detail {
// The workspace of one instantiation (defined with it); grouped_gemm_workspace_bytes takes the
// largest over the elements.
template <class Element, GroupedConfig C>
size_t grouped_workspace_bytes_of(int32_t num_groups, int sm_budget);
}  // namespace detail

}  // namespace tilelink::gemm
