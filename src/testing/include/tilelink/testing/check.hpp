// tilelink/testing/check.hpp — what tests and benchmarks of the fused ops share: random
// matrices, an fp32 reference GEMM (CUDA cores, independent of cuBLAS), the baseline GEMM
// (cuBLASLt) and a device-side comparison that reports one summary per check. Linked as
// tilelink_testing, not part of libtilelink and not installed (src/testing/include, apart from
// the public headers).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "tilelink/gemm/cublas_gemm.hpp"
#include "tilelink/ops/common.hpp"

namespace tilelink::test {

// Uniform values in [-scale, scale) as bf16/fp16, a pure function of (seed, index).
void fill_uniform(DType dtype, void* dev, int64_t n, uint64_t seed, float scale, cudaStream_t stream);

// Writes NaN into every element (so an element the op does not write fails the comparison).
void poison_nan(DType dtype, void* dev, int64_t n, cudaStream_t stream);

// ref[M,N] (fp32, row-major) = sum over `terms` of A_t[M,K] · B_t[N,K]ᵀ, with A_t at a + t*a_stride
// and B_t at b + t*b_stride (elements). Row-major, leading dimensions K. One term: a plain GEMM;
// beta != 0 adds beta * ref to the first term. Runs on the CUDA cores with fp32 sums in k order,
// sharing no code with the engine or with cuBLAS, so neither one's fault can hide in the check.
void reference_gemm(DType dtype, const void* a, const void* b, float* ref, int64_t m, int64_t n, int64_t k,
                    cudaStream_t stream, int terms = 1, int64_t a_stride = 0, int64_t b_stride = 0,
                    float beta = 0.0f);

// The baseline users have today: cuBLAS in the library's layout (tilelink/gemm/cublas_gemm.hpp).
using CublasGemm = gemm::CublasGemm;

struct Comparison {
  double rel_fro = 0;        // ||out - ref||_F / ||ref||_F
  double worst_excess = 0;   // max over elements of |out - ref| / (atol + rtol |ref|)
  int64_t bad = 0;           // elements over the tolerance (NaN counts as bad)
  int64_t worst_index = -1;
  float worst_out = 0, worst_ref = 0;
};
// out (dtype, row-major [m, n] with leading dimension ldo) against ref (fp32, [m, n] packed).
Comparison compare(DType dtype, const void* out, int64_t ldo, const float* ref, int64_t m, int64_t n,
                   double atol, double rtol, cudaStream_t stream);
std::string describe(const Comparison& c);

// Per-dtype tolerance of a GEMM output against an fp32 reference: the output is rounded once to
// the dtype (bf16: 8 bits of mantissa, fp16: 11), accumulation is fp32 in both.
struct Tolerance {
  double atol, rtol, rel_fro;
};
Tolerance gemm_tolerance(DType dtype, int64_t k);

}  // namespace tilelink::test
