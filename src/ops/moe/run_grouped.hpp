// src/ops/moe/run_grouped.hpp — the grouped GEMM of the MoE ops, dtype and config chosen at run
// time (both configs are instantiated for each hooks type the ops use: src/ops/CMakeLists.txt).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "tilelink/gemm/grouped.hpp"

namespace tilelink::ops {

template <class Hooks>
void run_grouped(const gemm::GroupedGemmArgs& g, gemm::GroupedConfig cfg, const Hooks& hooks, int sm_budget,
                 void* workspace, size_t bytes, cudaStream_t stream) {
  using C = gemm::GroupedConfig;
  auto run = [&](auto element) {
    using T = decltype(element);
    if (cfg == C::coop_128x256_c2x1)
      gemm::grouped_gemm_launch<T, Hooks, C::coop_128x256_c2x1>(g, hooks, sm_budget, workspace, bytes, stream);
    else
      gemm::grouped_gemm_launch<T, Hooks, C::pp_64x128_c1x2>(g, hooks, sm_budget, workspace, bytes, stream);
  };
  if (g.dtype == DType::bf16) run(__nv_bfloat16{});
  else run(__half{});
}

}  // namespace tilelink::ops
