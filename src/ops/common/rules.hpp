// src/ops/common/rules.hpp — the measured rules behind the ops' automatic choices (rules.cpp).
// The public ones (gemm_rs_choose_path, …) are declared with their ops; this adds the private one.
#pragma once

#include <cstdint>

#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"
#include "tilelink/ops/topology.hpp"

namespace tilelink::ops {

// Reduction blocks of gemm_rs/gemm_ar when the caller passes comm_sms = 0, for K per rank `k`.
int default_reduce_sms(const Topology& topo, int64_t k);

// ag_gemm's decomposed path with one GPU per rank: true for one cuBLAS GEMM per rank's rows
// beside copy-engine pulls, false for NCCL's all-gather followed by one cuBLAS GEMM.
bool ag_gemm_split_decomposed(const Topology& topo, const AgGemmArgs& a);

// gemm_rs's decomposed path with one GPU per rank: true for one cuBLAS GEMM per rank's rows with
// copy-engine pushes beside them (gemm_rs/per_rank_gemms.hpp), false for one cuBLAS GEMM then
// NCCL's reduce-scatter.
bool gemm_rs_split_decomposed(const Topology& topo, const GemmRsArgs& a);

// ag_moe's fused gather: true to pull each peer's tokens once into a local copy and sort from
// there, false to sort straight from the peers' staging.
bool moe_pull_tokens_first(int32_t topk);

}  // namespace tilelink::ops
