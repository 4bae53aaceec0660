// tilelink/ops/common/vec8.cuh — eight 16-bit values moved as one 16-byte word, summed in fp32
// (plain or weighted), packed back with round-to-nearest.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::ops {

#if defined(__CUDACC__)

template <class T>
struct Vec8;

template <>
struct Vec8<__nv_bfloat16> {
  static TL_DEVICE void add(float acc[8], const uint4& v) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      acc[2 * i] += f.x;
      acc[2 * i + 1] += f.y;
    }
  }
  // acc += scale * v (a weighted sum: the top-k combine of mixture-of-experts outputs).
  static TL_DEVICE void add_scaled(float acc[8], const uint4& v, float scale) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      acc[2 * i] = fmaf(scale, f.x, acc[2 * i]);
      acc[2 * i + 1] = fmaf(scale, f.y, acc[2 * i + 1]);
    }
  }
  static TL_DEVICE uint4 pack(const float acc[8]) {
    uint4 v;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
    return v;
  }
};

template <>
struct Vec8<__half> {
  static TL_DEVICE void add(float acc[8], const uint4& v) {
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      acc[2 * i] += f.x;
      acc[2 * i + 1] += f.y;
    }
  }
  // acc += scale * v (a weighted sum: the top-k combine of mixture-of-experts outputs).
  static TL_DEVICE void add_scaled(float acc[8], const uint4& v, float scale) {
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(h[i]);
      acc[2 * i] = fmaf(scale, f.x, acc[2 * i]);
      acc[2 * i + 1] = fmaf(scale, f.y, acc[2 * i + 1]);
    }
  }
  static TL_DEVICE uint4 pack(const float acc[8]) {
    uint4 v;
    __half2* h = reinterpret_cast<__half2*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(acc[2 * i], acc[2 * i + 1]);
    return v;
  }
};

#endif  // __CUDACC__

}  // namespace tilelink::ops
