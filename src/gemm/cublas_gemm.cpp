// src/gemm/cublas_gemm.cpp — see tilelink/gemm/cublas_gemm.hpp.
#include "tilelink/gemm/cublas_gemm.hpp"

#include "tilelink/runtime/error.hpp"

namespace tilelink::gemm {

CublasGemm::CublasGemm(cudaStream_t stream) : stream_(stream) {
  TL_REQUIRE(cublasCreate(&handle_) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
  TL_REQUIRE(cublasSetStream(handle_, stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  const size_t ws = size_t(32) << 20;
  TL_CUDA_CHECK(cudaMalloc(&workspace_, ws));
  TL_REQUIRE(cublasSetWorkspace(handle_, workspace_, ws) == CUBLAS_STATUS_SUCCESS, "cublasSetWorkspace failed");
}

CublasGemm::~CublasGemm() {
  cublasDestroy(handle_);
  cudaFree(workspace_);
}

void CublasGemm::run(DType dt, const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k,
                     std::optional<cudaStream_t> stream) {
  TL_REQUIRE(cublasSetStream(handle_, stream.value_or(stream_)) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
  // Row-major D = A·Bᵀ is column-major Dᵀ = B·Aᵀ: cuBLAS sees B transposed, A as is.
  const cudaDataType_t t = dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, b, t,
                                        int(k), a, t, int(k), &beta, d, t, int(n), CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT);
  TL_REQUIRE(s == CUBLAS_STATUS_SUCCESS, "cublasGemmEx failed: status ", int(s), " (m=", m, " n=", n, " k=", k, ")");
}

}  // namespace tilelink::gemm
