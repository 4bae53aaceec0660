// src/ops/common/fused_reduce.hpp — the machinery GEMM-ReduceScatter and GEMM-AllReduce share:
// GEMM that publishes its tiles + reduction kernel beside it (fused), or GEMM then collective
// (decomposed), with the buffers, signals and cross-call hand-over of reduce_kernels.cuh.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/common/rules.hpp"
#include "ops/common/side_stream.hpp"
#include "ops/common/uniform_check.hpp"
#include "tilelink/gemm/cublas_gemm.hpp"
#include "tilelink/ops/common.hpp"
#include "tilelink/ops/common/reduce_kernels.cuh"
#include "tilelink/runtime/context.hpp"

namespace tilelink::ops {

struct ReduceRequest {
  const char* op;  // "gemm_rs" / "gemm_ar": names workspaces and errors
  DType dtype;
  const void* a;
  const void* b;
  void* out;  // reduce-scatter: [m/W, n]; all-reduce: [m, n]
  int64_t m, n, k;
  ReduceAlgo algo;
  CommMode mode;
  int comm_sms;  // 0: automatic
  // The largest K of any rank (K shards may differ): the tile grid, and with it every signal
  // slot, and the reduction's block count are planned from it, so all ranks plan alike.
  int64_t k_plan = 0;
  cudaStream_t stream = nullptr;  // the caller's stream for this call (op_call.hpp)
};

struct ReduceState {
  explicit ReduceState(Context& ctx);
  ~ReduceState();
  SideStream side;
  UniformCheck uniform;
  const void* last_signals = nullptr;
  // gemm_rs's decomposed path split by rank (gemm_rs/per_rank_gemms.hpp): its signal slots, and
  // event i, recorded when the partial for the i-th peer in ring order is computed.
  const void* last_split_signals = nullptr;
  std::vector<cudaEvent_t> computed;
};

// Validation shared by both ops (local, before anything collective or any launch).
void validate_reduce(const Context& ctx, const ReduceRequest& r);

// Fused: GEMM with TileNotifyHooks on the caller's stream, reduction kernel on the side stream.
void fused_reduce(Context& ctx, ReduceState& st, const ReduceRequest& r);

// Decomposed: when every rank has its own GPU, cuBLAS into the partial buffer, then NCCL
// reduce-scatter / all-reduce (what a user writes without tilelink); when ranks share a GPU
// (NCCL cannot run there), the engine's GEMM, then the reduction kernel (no overlap).
void decomposed_reduce(Context& ctx, ReduceState& st, const ReduceRequest& r);

}  // namespace tilelink::ops
