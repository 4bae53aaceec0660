// tilelink/gemm/cublas_gemm.hpp — the vendor GEMM (cuBLAS) in the engine's layout:
// D[M,N] = A[M,K]·B[N,K]ᵀ, row-major, bf16/fp16 in and out, fp32 compute.
//
// The decomposed paths of the fused ops use it (GEMM, then an NCCL collective: exactly what a
// user would otherwise write, so "never slower than decomposed" holds even where the engine is
// not yet at cuBLAS speed, e.g. decode-sized M without split-K), and tests and benchmarks use it
// as the baseline.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/ops/common.hpp"

namespace tilelink::gemm {

class CublasGemm {
 public:
  // A handle bound to `stream`, with the 32 MiB workspace PyTorch gives cuBLAS on Hopper.
  explicit CublasGemm(cudaStream_t stream);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;
  // On `stream` (unset: the one the handle was made with). Throws tilelink::Error naming the
  // shape when cuBLAS rejects the call.
  void run(DType dt, const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k,
           std::optional<cudaStream_t> stream = {});

 private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace tilelink::gemm
