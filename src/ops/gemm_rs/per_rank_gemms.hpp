// src/ops/gemm_rs/per_rank_gemms.hpp — gemm_rs's decomposed path with one GPU per rank, split
// by rank (PyTorch's async-TP has this structure): one cuBLAS GEMM per rank's block of output
// rows, the peers' blocks first, each pushed to its owner by the copy engine while the next GEMM
// runs; this rank's own block last, then one pass that sums the W partials of its rows.
//
// Every cross-rank signal sits before the first GEMM or after the last copy: cuBLAS may hold
// every SM while it runs, and a signal kernel queued behind it waits for its end (copies and
// stream events need no SM).
#pragma once

#include "ops/common/fused_reduce.hpp"

namespace tilelink::ops {

// Reduce-scatter only (r.m divisible by the world size, validated before); one GPU per rank.
void per_rank_gemms_reduce_scatter(Context& ctx, ReduceState& st, const ReduceRequest& r);

}  // namespace tilelink::ops
