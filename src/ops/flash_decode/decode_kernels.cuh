// src/ops/flash_decode/decode_kernels.cuh — the kernels of flash_decode.
//
// decode_partial_kernel: one block per (chunk of this rank's shard, kv head, sequence); the
// G query heads that share the kv head are computed together, so every K and V row is read from
// memory once. Each warp takes 8 tokens at a time:
//   scores: 4 lanes per token, each a quarter of head_dim, q from shared memory; 2 shuffles
//           per head finish the dot products;
//   softmax: per head, the running max over the 8 tokens, one exp2 per (token, head), the sums;
//   values: every lane owns head_dim / 32 dimensions of the output of every head and reads
//           those dimensions of the 8 V rows.
// The block then folds its 8 warps' partial results in shared memory and writes the chunk's
// normalised output and log-sum-exp (base 2) in fp32.
// combine_kernel folds P partial (output, log-sum-exp) pairs into one: across chunks on a rank,
// and across ranks after the all-gather.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace tilelink::ops::decode {

#define TL_DEVICE_INLINE __device__ __forceinline__

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kTokens = 8;  // per warp and step

template <class T>
__device__ __forceinline__ float2 to_float2(uint32_t bits);
template <>
__device__ __forceinline__ float2 to_float2<__nv_bfloat16>(uint32_t bits) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
}
template <>
__device__ __forceinline__ float2 to_float2<__half>(uint32_t bits) {
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}
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

// Shared memory of decode_partial_kernel<T, D, GM>.
template <int D, int GM>
struct PartialSmem {
  // q as float, 4 floats of padding per 32: the 4 lanes of a token read 16-byte vectors from 4
  // different bank groups, and the 8 tokens of a warp read the same addresses (a broadcast).
  static constexpr int kQStride = D + D / 8;
  static TL_DEVICE_INLINE int q_index(int d) { return d + 4 * (d / 32); }
  float q[GM * kQStride];
  float s[kWarps][kTokens][GM];
  float wm[kWarps][GM], wl[kWarps][GM];
  float wacc[kWarps][GM][D];
};

template <class T, int D, int GM>
__global__ void __launch_bounds__(kThreads) decode_partial_kernel(const PartialParams p) {
  constexpr int kQkDims = D / 4;        // dims per lane for the scores
  constexpr int kQkVecs = kQkDims / 8;  // 16-byte loads per lane and token
  constexpr int kPvDims = D / 32;       // output dims per lane
  using Smem = PartialSmem<D, GM>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);

  for (int i = threadIdx.x; i < GM * D; i += kThreads) {
    const int h = i / D, d = i % D;
    sm.q[h * Smem::kQStride + Smem::q_index(d)] =
        h < p.g ? to_float2<T>(uint32_t(*reinterpret_cast<const uint16_t*>(
                      q + (int64_t(b) * p.q_heads + hk * p.g + h) * D + d)))
                      .x
                : 0.0f;
  }
  __syncthreads();

  const int64_t t0 = int64_t(split) * p.chunk;
  const int64_t t1 = t0 + p.chunk < p.kv_len ? t0 + p.chunk : p.kv_len;
  const int64_t row_stride = int64_t(p.kv_heads) * D;
  const T* k_seq = k + int64_t(b) * p.kv_len * row_stride + int64_t(hk) * D;
  const T* v_seq = v + int64_t(b) * p.kv_len * row_stride + int64_t(hk) * D;
  float m[GM], l[GM], acc[GM][kPvDims];
#pragma unroll
  for (int h = 0; h < GM; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < kPvDims; ++e) acc[h][e] = 0.0f;
  }
  const int jt = lane / 4, sub = lane % 4;
  for (int64_t base = t0 + int64_t(warp) * kTokens; base < t1; base += int64_t(kWarps) * kTokens) {
    // Scores of the 8 tokens.
    const int64_t t = base + jt;
    float s[GM];
#pragma unroll
    for (int h = 0; h < GM; ++h) s[h] = 0.0f;
    // This step's V rows are loaded now, beside K, so that both are in flight together.
    uint2 vraw[kTokens];
#pragma unroll
    for (int j = 0; j < kTokens; ++j) {
      vraw[j] = make_uint2(0u, 0u);
      if (base + j < t1) {
        const T* vrow = v_seq + (base + j) * row_stride + lane * kPvDims;
        if constexpr (kPvDims == 4) vraw[j] = __ldg(reinterpret_cast<const uint2*>(vrow));
        else vraw[j].x = __ldg(reinterpret_cast<const uint32_t*>(vrow));
      }
    }
    if (t < t1) {
      const uint4* krow = reinterpret_cast<const uint4*>(k_seq + t * row_stride + sub * kQkDims);
      uint4 kraw[kQkVecs];
#pragma unroll
      for (int c = 0; c < kQkVecs; ++c) kraw[c] = __ldg(krow + c);
#pragma unroll
      for (int c = 0; c < kQkVecs; ++c) {
        const uint32_t w[4] = {kraw[c].x, kraw[c].y, kraw[c].z, kraw[c].w};
        float kf[8];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = to_float2<T>(w[e]);
          kf[2 * e] = f.x;
          kf[2 * e + 1] = f.y;
        }
        const int d = sub * kQkDims + c * 8;
#pragma unroll
        for (int h = 0; h < GM; ++h) {
          const float4* qh = reinterpret_cast<const float4*>(sm.q + h * Smem::kQStride + Smem::q_index(d));
          const float4 q0 = qh[0], q1 = qh[1];
          s[h] = fmaf(q0.x, kf[0], fmaf(q0.y, kf[1], fmaf(q0.z, kf[2], fmaf(q0.w, kf[3], s[h]))));
          s[h] = fmaf(q1.x, kf[4], fmaf(q1.y, kf[5], fmaf(q1.z, kf[6], fmaf(q1.w, kf[7], s[h]))));
        }
      }
    }
#pragma unroll
    for (int h = 0; h < GM; ++h) {
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 1);
      s[h] += __shfl_xor_sync(0xffffffffu, s[h], 2);
    }
    if (sub == 0) {
#pragma unroll
      for (int h = 0; h < GM; ++h) sm.s[warp][jt][h] = (t < t1 && h < p.g) ? s[h] * p.scale_log2 : -INFINITY;
    }
    __syncwarp();
    // Softmax: new running max per head, one exp2 per (token, head) (lanes 0-7, a token each),
    // the rescale of what was accumulated.
    float corr[GM];
#pragma unroll
    for (int h = 0; h < GM; ++h) {
      float mx = m[h];
#pragma unroll
      for (int j = 0; j < kTokens; ++j) mx = fmaxf(mx, sm.s[warp][j][h]);
      corr[h] = mx == -INFINITY ? 1.0f : exp2f(m[h] - mx);
      m[h] = mx;
    }
    __syncwarp();
    if (lane < kTokens) {
#pragma unroll
      for (int h = 0; h < GM; ++h) {
        const float sv = sm.s[warp][lane][h];
        sm.s[warp][lane][h] = sv == -INFINITY ? 0.0f : exp2f(sv - m[h]);
      }
    }
    __syncwarp();
#pragma unroll
    for (int h = 0; h < GM; ++h) {
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kTokens; ++j) sum += sm.s[warp][j][h];
      l[h] = l[h] * corr[h] + sum;
#pragma unroll
      for (int e = 0; e < kPvDims; ++e) acc[h][e] *= corr[h];
    }
    // Values.
#pragma unroll
    for (int j = 0; j < kTokens; ++j) {
      float vf[kPvDims];
      const float2 a = to_float2<T>(vraw[j].x);
      vf[0] = a.x, vf[1] = a.y;
      if constexpr (kPvDims == 4) {
        const float2 c = to_float2<T>(vraw[j].y);
        vf[2] = c.x, vf[3] = c.y;
      }
#pragma unroll
      for (int h = 0; h < GM; ++h) {
        const float pj = sm.s[warp][j][h];  // 0 for a token past the end
#pragma unroll
        for (int e = 0; e < kPvDims; ++e) acc[h][e] = fmaf(pj, vf[e], acc[h][e]);
      }
    }
    __syncwarp();
  }

  // Fold the warps.
#pragma unroll
  for (int h = 0; h < GM; ++h) {
    if (lane == 0) {
      sm.wm[warp][h] = m[h];
      sm.wl[warp][h] = l[h];
    }
#pragma unroll
    for (int e = 0; e < kPvDims; ++e) sm.wacc[warp][h][lane * kPvDims + e] = acc[h][e];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < p.g * D; i += kThreads) {
    const int h = i / D, d = i % D;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm.wm[w][h]);
    float o = 0.0f, lse = -INFINITY;
    if (mx != -INFINITY) {
      float sum = 0.0f;
      for (int w = 0; w < kWarps; ++w) {
        const float f = exp2f(sm.wm[w][h] - mx);
        sum += sm.wl[w][h] * f;
        o += sm.wacc[w][h][d] * f;
      }
      o /= sum;
      lse = mx + log2f(sum);
    }
    const int64_t row = (int64_t(split) * p.batch + b) * p.q_heads + hk * p.g + h;
    p.part_o[row * D + d] = o;
    if (d == 0) p.part_lse[row] = lse;
  }
}

// Folds `parts` partial results: part r of row i is o[r * o_stride + i * D + d] and
// lse[r * lse_stride + i] (base 2; -inf: no tokens). One block of D threads per row. Writes the
// normalised output as OutT (float or the op's dtype) and, when out_lse is given, the folded lse.
template <class OutT>
__global__ void combine_kernel(const float* o, const float* lse, int parts, int64_t o_stride, int64_t lse_stride,
                               int D, OutT* out, float* out_lse) {
  const int64_t row = blockIdx.x;
  const int d = threadIdx.x;
  float mx = -INFINITY;
  for (int r = 0; r < parts; ++r) mx = fmaxf(mx, lse[r * lse_stride + row]);
  float acc = 0.0f, sum = 0.0f;
  if (mx != -INFINITY) {
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
