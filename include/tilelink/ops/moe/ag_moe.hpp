// tilelink/ops/moe/ag_moe.hpp — AllGather + grouped GEMM: the first GEMM of a tensor-parallel
// mixture-of-experts layer.
//
//   y[t*topk + j, :] = x_gathered[t, :] · w[topk_ids[t, j]]ᵀ      t < M = world * m_per_rank
//
// Every rank holds every expert, sharded along the intermediate dimension (w is this rank's
// [num_experts, n, hidden] slice, n = I / world, or 2 I / world for a fused gate+up projection),
// its own m_per_rank tokens x, and the routing of all M gathered tokens (topk_ids, the same on
// every rank, e.g. from a replicated router).
//
// On the device, with no host synchronisation: the routing is sorted into groups (source rank ×
// expert, this rank's own tokens first), the tokens are gathered into that order from the ranks'
// symmetric staging buffers by a few SMs, chunk by chunk (one chunk per source rank), and a
// grouped GEMM (CUTLASS's pointer-array kernel) runs beside the gather: each of its tiles waits
// only for the chunk its group reads. The decomposed path gathers with NCCL first.
//
//   tilelink::AgMoeArgs args{DType::bf16, x, topk_ids, w, y, m_per_rank, hidden, n, experts, topk};
//   tilelink::ag_moe(ctx, args);       // SPMD on every rank
//
// Checked before launch: dtype, pointers and 16-byte alignment, hidden and n multiples of 8,
// 1 <= topk <= num_experts, and that the shape agrees across ranks. Expert ids are only known on
// the device: an id outside [0, num_experts) leaves its output row NaN, is counted, and makes the
// next ag_moe call on the context (or ag_moe_check) throw, naming how many there were.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/ops/common.hpp"
#include "tilelink/ops/path.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink {

struct AgMoeArgs {
  DType dtype = DType::bf16;
  const void* x = nullptr;            // [m_per_rank, hidden]: this rank's tokens
  const int32_t* topk_ids = nullptr;  // device [world * m_per_rank, topk]: experts of every token
  const void* w = nullptr;            // [num_experts, n, hidden]: this rank's slice of each expert
  void* y = nullptr;                  // [world * m_per_rank * topk, n] (see sorted_rows)
  int64_t m_per_rank = 0, hidden = 0, n = 0;
  int32_t num_experts = 0, topk = 0;
  // Optional: the expert-sorted layout the grouped GEMM produces, which is what a following
  // grouped GEMM wants. When set, y receives rows in that order instead, and sorted_rows[t*topk+j]
  // (device, int32 [M * topk]) the row of y that holds entry (t, j) (-1 for an invalid id).
  int32_t* sorted_rows = nullptr;
};

struct AgMoeOptions {
  OpPath path = OpPath::automatic;  // automatic: fused
  int comm_sms = 0;                 // SMs of the gather (0: automatic)
  // false: skip the gather and reuse the tokens an earlier call gathered with the same shape and
  // routing (bitwise checks of the compute part, benchmarks).
  bool communicate = true;
  std::optional<cudaStream_t> stream;
};

void ag_moe(Context& ctx, const AgMoeArgs& args, const AgMoeOptions& options = {});

// Throws if an earlier call's routing held expert ids out of range (see above); waits for the
// context's calls to finish.
void ag_moe_check(Context& ctx);

}  // namespace tilelink
