// tilelink/ops/gemm_rs/gemm_rs.hpp — GEMM-ReduceScatter.
//
//   C_r[M/W, N] = rows r of  Σ_q A_q[M, K_q] · B_q[N, K_q]ᵀ      (A sharded along K)
//
// Every rank passes its K-slice of A and B; rank r receives its M/W rows of the sum. Fused: the
// GEMM publishes each output tile as it is stored, and a reduction kernel on a few SMs consumes
// the tiles in the GEMM's order (each rank starts on the rows its ring neighbour needs first),
// sums partials in fp32 and moves them: ring or full-mesh, push or pull. Decomposed, with one GPU
// per rank: one cuBLAS GEMM per rank's block of rows, each pushed to its owner by the copy engine
// while the next runs, then a sum of the received partials (where that pays), else cuBLAS then
// NCCL's reduce-scatter; ranks sharing a GPU: the engine's GEMM, then tilelink's reduction kernel.
//
//   tilelink::GemmRsArgs args{DType::bf16, a, b, c, m, n, k};
//   tilelink::gemm_rs(ctx, args);     // options.path = automatic | fused | decomposed
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/ops/common.hpp"
#include "tilelink/ops/path.hpp"
#include "tilelink/ops/topology.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink {

using ReducePath = OpPath;  // the reduction ops' name for it
enum class RsAlgo : int32_t { ring = 0, full_mesh = 1, automatic = 2 };
inline const char* rs_algo_name(RsAlgo a) {
  return a == RsAlgo::ring ? "ring" : a == RsAlgo::full_mesh ? "full_mesh" : "auto";
}

struct GemmRsArgs {
  DType dtype = DType::bf16;
  const void* a = nullptr;  // [m, k] row-major: this rank's K-slice of A
  const void* b = nullptr;  // [n, k] row-major: this rank's K-slice of B
  void* c = nullptr;        // [m / world, n] row-major: this rank's rows of the sum
  int64_t m = 0, n = 0, k = 0;
};

struct GemmRsOptions {
  ReducePath path = ReducePath::automatic;
  RsAlgo algo = RsAlgo::automatic;  // automatic also picks `mode` (gemm_rs_choose_algo)
  CommMode mode = CommMode::push;
  int comm_sms = 0;  // SMs for the reduction kernel (0: automatic, 16-32 on a whole GPU)
  RankSplit split = RankSplit::automatic;  // the decomposed path's division (tilelink/ops/path.hpp)
  // The stream the call runs on (unset: ctx.stream()). A context's calls run one after another
  // whatever their streams: a call on another stream than the previous one waits for it.
  std::optional<cudaStream_t> stream;
};

// What `automatic` picks for this shape on this topology (the rules of docs/OPS.md).
struct RsSchedule {
  RsAlgo algo;
  CommMode mode;
};
ReducePath gemm_rs_choose_path(const Topology& topo, const GemmRsArgs& args);
RsSchedule gemm_rs_choose_algo(const Topology& topo);
inline ReducePath gemm_rs_choose_path(const Context& ctx, const GemmRsArgs& args) {
  return gemm_rs_choose_path(topology_of(ctx), args);
}
inline RsSchedule gemm_rs_choose_algo(const Context& ctx) { return gemm_rs_choose_algo(topology_of(ctx)); }

void gemm_rs(Context& ctx, const GemmRsArgs& args, const GemmRsOptions& options = {});

}  // namespace tilelink
