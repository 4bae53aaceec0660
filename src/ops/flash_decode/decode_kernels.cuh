// src/ops/flash_decode/decode_kernels.cuh — what flash_decode's kernels share: the parameters of
// the split-KV kernel (decode_mma.cuh), conversions, and combine_kernel, which folds P partial
// (output, log-sum-exp) pairs into one: across chunks on a rank, and across ranks after the
// all-gather.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace tilelink::ops::decode {

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }

struct PartialParams {
  const void* q;
  const void* k;
  const void* v;
  float* part_o;    // [splits, batch, q_heads, D]
  float* part_lse;  // [splits, batch, q_heads] (base 2)
  int64_t kv_len, chunk;
  int batch, q_heads, kv_heads, g;
  float scale_log2;  // softmax scale x log2(e)
};

// Folds `parts` partial results: part r of row i is o[r * o_stride + i * D + d] and
// lse[r * lse_stride + i] (base 2; -inf: no tokens). One block of D threads per row. Writes the
// normalised output as OutT (float or the op's dtype) and, when out_lse is given, the folded lse.
template <class OutT>
__global__ void combine_kernel(const float* o, const float* lse, int parts, int64_t o_stride, int64_t lse_stride,
                               int D, OutT* out, float* out_lse) {
  const int64_t row = blockIdx.x;
  const int d = threadIdx.x;
  // Independent loads, several in flight: a thread folds up to hundreds of chunks.
  float mx = -INFINITY;
#pragma unroll 8
  for (int r = 0; r < parts; ++r) mx = fmaxf(mx, lse[r * lse_stride + row]);
  float acc = 0.0f, sum = 0.0f;
  if (mx != -INFINITY) {
#pragma unroll 8
    for (int r = 0; r < parts; ++r) {
      const float f = exp2f(lse[r * lse_stride + row] - mx);
      sum += f;
      acc += f * o[r * o_stride + row * D + d];
    }
    acc /= sum;
  }
  if constexpr (std::is_same_v<OutT, float>) out[row * D + d] = acc;
  else out[row * D + d] = from_float<OutT>(acc);
  if (out_lse != nullptr && d == 0) out_lse[row] = mx == -INFINITY ? -INFINITY : mx + log2f(sum);
}

}  // namespace tilelink::ops::decode
