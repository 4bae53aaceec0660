// tilelink/ops/moe/moe_rs.hpp — grouped GEMM + top-k weighted reduce + ReduceScatter: the second
// GEMM of a tensor-parallel mixture-of-experts layer.
//
//   out[i, :] = Σ_ranks Σ_j topk_weights[t, j] · h[t*topk + j, :] · w[topk_ids[t, j]]ᵀ
//               for this rank's tokens t = rank * (M / world) + i
//
// Every rank holds its slice of the activated intermediate of every (token, expert) pair, h
// [M * topk, k_shard] in token order (what ag_moe returns, after the activation), and its slice of
// every expert's down projection, w [num_experts, hidden, k_shard]; the routing (topk_ids, and the
// fp32 topk_weights) is the same on every rank. Each rank receives its M / world tokens' rows of
// the sum over ranks.
//
// On the device, with no host synchronisation: the routing tables sort the pairs into groups
// (destination rank × expert; the rows the next rank needs first, this rank's own last), the grouped
// GEMM runs over them, and a few SMs beside it take each destination's rows as soon as all of
// their tiles are stored: the top-k weighted sum of each token's rows (fp32), written straight
// into the destination rank's receive buffer; each rank then adds the ranks' partials in rank
// order. The decomposed path runs the GEMM, the weighted sum, and NCCL's reduce-scatter in stream
// order.
//
//   tilelink::MoeRsArgs args{DType::bf16, h, topk_ids, topk_weights, w, out, tokens, hidden, k_shard, experts, topk};
//   tilelink::moe_rs(ctx, args);
//
// Checked before launch: dtype, pointers, 16-byte alignment, hidden and k_shard multiples of 8,
// tokens a multiple of the world size, 1 <= topk <= num_experts, shapes agreeing across ranks. An
// expert id out of range contributes nothing, is counted, and makes the next moe_rs call (or
// moe_rs_check) throw.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/ops/common.hpp"
#include "tilelink/ops/path.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink {

struct MoeRsArgs {
  DType dtype = DType::bf16;
  const void* h = nullptr;                // [tokens * topk, k_shard], row t*topk + j
  const int32_t* topk_ids = nullptr;      // device [tokens, topk]
  const float* topk_weights = nullptr;    // device [tokens, topk]
  const void* w = nullptr;                // [num_experts, hidden, k_shard]
  void* out = nullptr;                    // [tokens / world, hidden]
  int64_t tokens = 0, hidden = 0, k_shard = 0;
  int32_t num_experts = 0, topk = 0;
  // Optional (device, int32 [tokens * topk]): h's row of entry (t, j) — h in the expert-sorted
  // layout ag_moe produces with its sorted_rows, passed here as they came back (an activation in
  // between keeps the rows where they are). Saves ag_moe's copy back to token order. Rows of
  // invalid entries (-1) are never read. nullptr: h is in token order.
  const int32_t* h_rows = nullptr;
};

struct MoeRsOptions {
  OpPath path = OpPath::automatic;  // automatic: fused
  int comm_sms = 0;                 // SMs of the reduction beside the GEMM (0: automatic)
  std::optional<cudaStream_t> stream;
};

void moe_rs(Context& ctx, const MoeRsArgs& args, const MoeRsOptions& options = {});

// Throws if an earlier call's routing held expert ids out of range; waits for the context's calls.
void moe_rs_check(Context& ctx);

}  // namespace tilelink
