// src/ops/common/fused_reduce.hpp — the machinery GEMM-ReduceScatter and GEMM-AllReduce share:
// GEMM that publishes its tiles + reduction kernel beside it (fused), or GEMM then collective
// (decomposed), with the buffers, signals and cross-call hand-over of reduce_kernels.cuh.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ops/common/side_stream.hpp"
#include "ops/common/uniform_check.hpp"
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
};

struct ReduceState {
  explicit ReduceState(Context& ctx);
  ~ReduceState();
  SideStream side;
  UniformCheck uniform;
  uint64_t reads_expected = 0;   // running total of reading blocks (see reduce_kernels.cuh)
  const void* last_signals = nullptr;
};

// Validation shared by both ops (local, before anything collective or any launch).
void validate_reduce(const Context& ctx, const ReduceRequest& r);

// Fused: GEMM with TileNotifyHooks on the caller's stream, reduction kernel on the side stream.
void fused_reduce(Context& ctx, ReduceState& st, const ReduceRequest& r);

// Decomposed: GEMM into the partial buffer, then NCCL reduce-scatter / all-reduce when every
// rank has its own GPU, else the reduction kernel after the GEMM (no overlap).
void decomposed_reduce(Context& ctx, ReduceState& st, const ReduceRequest& r);

// Reduction blocks used when the caller passes 0.
int default_reduce_sms(const Context& ctx);

}  // namespace tilelink::ops
