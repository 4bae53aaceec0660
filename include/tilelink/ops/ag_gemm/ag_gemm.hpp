// tilelink/ops/ag_gemm/ag_gemm.hpp — AllGather-GEMM.
//
//   C[M, N] = AllGather_rows(A)[M, K] · B[N, K]ᵀ,   M = world * m_per_rank
//
// Every rank passes its m_per_rank rows of A and its own B (e.g. its N shard of a column-parallel
// weight); every rank gets the full C for its B. The gather runs beside the GEMM: each rank's GEMM
// starts on its own rows while the other ranks' rows arrive chunk by chunk, and every GEMM tile
// waits (bounded) only for the chunks it reads.
//
// Decomposed (options.path, or the automatic rule), with one GPU per rank: cuBLAS on this rank's
// rows while the copy engine pulls the peers' rows, then one cuBLAS GEMM per peer as its rows land
// (where that pays), else NCCL's all-gather then cuBLAS; ranks sharing a GPU: the op's own gather
// on the copy engines, then cuBLAS.
//
//   tilelink::AgGemmArgs args{DType::bf16, a_local, b, c, m_per_rank, n, k};
//   tilelink::ag_gemm(ctx, args);     // SPMD on every rank, on ctx.stream() or options.stream
//
// Inputs are checked before launch: dtype, alignment (16 B), K and N multiples of 8, and that
// m_per_rank, K, dtype and the options agree across ranks (checked collectively the first time a
// combination is seen on this context).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/ops/common.hpp"
#include "tilelink/ops/path.hpp"
#include "tilelink/ops/topology.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink {

struct AgGemmArgs {
  DType dtype = DType::bf16;
  const void* a = nullptr;  // [m_per_rank, k] row-major: this rank's rows of A
  const void* b = nullptr;  // [n, k] row-major
  void* c = nullptr;        // [world * m_per_rank, n] row-major
  int64_t m_per_rank = 0, n = 0, k = 0;
  void* a_gathered = nullptr;  // optional [world * m_per_rank, k]: receives the gathered A
};

struct AgGemmOptions {
  OpPath path = OpPath::automatic;  // automatic: ag_gemm_choose_path
  // The fused path's defaults, from the 2-GPU NVLink measurements (docs/PERF.md): SM push beat
  // NCCL all-gather + cuBLAS by 1.02-1.13x on every reference shape; the copy engine lost
  // (0.48-0.70x). The decomposed path on ranks sharing a GPU always gathers on the copy engines,
  // except in a call captured in a CUDA graph, which always gathers on SMs.
  CommMode mode = CommMode::push;
  CommEngine engine = CommEngine::sm;
  int comm_sms = 0;          // CommEngine::sm: SMs given to the gather kernel (0: automatic)
  int chunk_rows = 0;        // rows per gathered chunk (0: automatic, docs/OPS.md)
  RankSplit split = RankSplit::automatic;  // the decomposed path's division (tilelink/ops/path.hpp)
  // false: skip the gather and use the A already gathered on this rank by an earlier call with
  // the same shape and path (benchmarks of the compute part; bitwise checks against the full op).
  bool communicate = true;
  // The stream the call runs on (unset: ctx.stream()). A context's calls run one after another
  // whatever their streams: a call on another stream than the previous one waits for it.
  std::optional<cudaStream_t> stream;
};

// What `automatic` picks for this shape on this topology (the rule of docs/OPS.md).
OpPath ag_gemm_choose_path(const Topology& topo, const AgGemmArgs& args);
inline OpPath ag_gemm_choose_path(const Context& ctx, const AgGemmArgs& args) {
  return ag_gemm_choose_path(topology_of(ctx), args);
}

void ag_gemm(Context& ctx, const AgGemmArgs& args, const AgGemmOptions& options = {});

}  // namespace tilelink
