// src/ops/common/op_gemm.hpp — the GEMM configs the fused ops are compiled for, in one place.
//
// Every library config serves bf16 (the dtype LLM training and inference run in); fp16 gets three
// (coop 128x256 for large tiles of work, ping-pong 128x128 for the rest, ping-pong 64x128 for
// decode-sized M), because each config costs about a minute of compile per dtype and hooks type
// on the 2-core CI machine.
// src/ops/CMakeLists.txt instantiates exactly these; choose/run here keep to them.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "tilelink/gemm/gemm.hpp"

namespace tilelink::ops {

inline constexpr uint64_t kFp16OpConfigs = gemm::config_bit(gemm::GemmConfig::coop_128x256_c2x1) |
                                           gemm::config_bit(gemm::GemmConfig::pp_128x128_c2x1) |
                                           gemm::config_bit(gemm::GemmConfig::pp_64x128_c2x1);

inline gemm::GemmPlan choose_op_plan(const gemm::GemmShape& shape, DType dtype, int sm_budget) {
  return dtype == DType::bf16 ? gemm::choose_config(shape, dtype, sm_budget)
                              : gemm::choose_config(shape, dtype, sm_budget, kFp16OpConfigs);
}

template <class Hooks>
void run_op_gemm(DType dtype, const void* a, const void* b, void* d, const gemm::GemmShape& shape,
                 const Hooks& hooks, const gemm::GemmPlan& plan, int sm_budget, cudaStream_t stream) {
  if (dtype == DType::bf16) {
    using T = __nv_bfloat16;
    const gemm::GemmArgs<T> g{static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(d), shape};
    gemm::run_gemm<T, Hooks>(g, hooks, plan, sm_budget, stream);
  } else {
    using T = __half;
    const gemm::GemmArgs<T> g{static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(d), shape};
    gemm::run_gemm_among<T, Hooks, gemm::GemmConfig::coop_128x256_c2x1, gemm::GemmConfig::pp_128x128_c2x1,
                         gemm::GemmConfig::pp_64x128_c2x1>(g, hooks, plan, sm_budget, stream);
  }
}

}  // namespace tilelink::ops
