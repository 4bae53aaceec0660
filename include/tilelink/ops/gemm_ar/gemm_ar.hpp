// tilelink/ops/gemm_ar/gemm_ar.hpp — GEMM-AllReduce (decode-sized batches of row-parallel layers).
//
//   C[M, N] = Σ_q A_q[M, K_q] · B_q[N, K_q]ᵀ   on every rank
//
// Fused: the GEMM publishes each tile to every rank; one_shot — every rank reads all partials of
// every tile and sums them (fewest hops, best for small M); two_shot — each rank reduces its M/W
// rows (full-mesh pull) and broadcasts the sum (half the traffic, better for larger M).
// Decomposed: GEMM then all-reduce (cuBLAS + NCCL when every rank has its own GPU).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/ops/common.hpp"
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"  // ReducePath
#include "tilelink/runtime/context.hpp"

namespace tilelink {

enum class ArAlgo : int32_t { automatic = 0, one_shot = 1, two_shot = 2 };
inline const char* ar_algo_name(ArAlgo a) {
  return a == ArAlgo::one_shot ? "one_shot" : a == ArAlgo::two_shot ? "two_shot" : "auto";
}

struct GemmArArgs {
  DType dtype = DType::bf16;
  const void* a = nullptr;  // [m, k]
  const void* b = nullptr;  // [n, k]
  void* c = nullptr;        // [m, n] on every rank
  int64_t m = 0, n = 0, k = 0;
};

struct GemmArOptions {
  ReducePath path = ReducePath::automatic;
  ArAlgo algo = ArAlgo::automatic;
  int comm_sms = 0;
  // The stream the call runs on (unset: ctx.stream()). A context's calls run one after another
  // whatever their streams: a call on another stream than the previous one waits for it.
  std::optional<cudaStream_t> stream;
};

// What `automatic` picks for this shape on this topology (the rules of docs/OPS.md).
ReducePath gemm_ar_choose_path(const Topology& topo, const GemmArArgs& args);
ArAlgo gemm_ar_choose_algo(const Topology& topo, const GemmArArgs& args);
inline ReducePath gemm_ar_choose_path(const Context& ctx, const GemmArArgs& args) {
  return gemm_ar_choose_path(topology_of(ctx), args);
}
inline ArAlgo gemm_ar_choose_algo(const Context& ctx, const GemmArArgs& args) {
  return gemm_ar_choose_algo(topology_of(ctx), args);
}

void gemm_ar(Context& ctx, const GemmArArgs& args, const GemmArOptions& options = {});

}  // namespace tilelink
