// tilelink/gemm/cublas_gemm.hpp — the vendor GEMM as PyTorch runs it, in the engine's layout:
// D[M,N] = A[M,K]·B[N,K]ᵀ, row-major, bf16/fp16 in and out, fp32 compute, through cuBLASLt with
// the first algorithm of its heuristic and a 32 MiB workspace (what F.linear does on Hopper).
//
// The decomposed paths of the fused ops use it (GEMM, then an NCCL collective: exactly what a
// user would otherwise write, so "never slower than decomposed" holds even where the engine is
// not yet at cuBLAS speed), and tests and benchmarks use it as the baseline.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tilelink/core/dtype.hpp"

namespace tilelink::gemm {

class CublasGemm {
 public:
  // A handle whose calls default to `stream`, with the workspace PyTorch gives cuBLAS on Hopper.
  explicit CublasGemm(cudaStream_t stream);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;
  // On `stream` (unset: the one the handle was made with). The heuristic runs once per shape,
  // dtype and operand alignment; later calls reuse its choice. Throws tilelink::Error naming the
  // shape when cuBLASLt rejects the call or finds no algorithm.
  void run(DType dt, const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k,
           std::optional<cudaStream_t> stream = {});
  // The algorithm the heuristic picked for the same call (the one run() runs), in the engine's
  // orientation (a tile's rows are rows of A, its columns rows of B, cluster likewise):
  // "tile 96x128 cluster 1x2 stages 64x4 splitk 1 swizzle 0 algo 66 option 0" — what the vendor
  // runs where the engine is compared with it. "?" where cuBLASLt leaves a field to the kernel.
  std::string algorithm(DType dt, const void* a, const void* b, const void* d, int64_t m, int64_t n, int64_t k);

 private:
  struct Plan;
  // dtype, m, n, k and the alignment (bytes, up to 256) of a, b and d.
  using Key = std::array<int64_t, 7>;
  const Plan& plan(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;  // Plan is defined in the .cpp
};

}  // namespace tilelink::gemm
