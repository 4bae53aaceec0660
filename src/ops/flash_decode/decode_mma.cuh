// src/ops/flash_decode/decode_mma.cuh — the split-KV decode kernel on tensor cores.
//
// One block of 4 warps per (chunk of this rank's shard, kv head, sequence). The G <= 16 query
// heads of the kv head are the M side (16 rows, the unused ones zero) of mma.sync m16n8k16, so
// every K and V row is read from memory once and the arithmetic is off the CUDA cores. A warp
// takes 16 tokens a step:
//   scores S[16 heads x 16 tokens] = Q · Kᵀ: each lane loads 16-byte pieces of K rows (lane
//     group g = lane / 4 loads token g of each 8-token tile, lane t = lane % 4 the 8 dimensions
//     t*8.. of every 32); the dot product does not care in which order dimensions are summed, so
//     Q's fragments are loaded with the same permutation and the loads stay 16 bytes wide;
//   online softmax on the accumulator fragments (a lane holds 2 heads x 4 tokens; a row's max is
//     finished by 2 shuffles in the lane quad), P rounded to the input type;
//   O += P · V: P's accumulator fragments are the A fragments of the next mma as they stand; V is
//     loaded like K (16 bytes per lane) and each 8x8 block transposed in registers (movmatrix) into
//     B fragments, which permutes the output dimensions in a known way, undone when stored.
// K and V reach shared memory by cp.async, kStages steps ahead of the math, so each warp keeps
// ~16 KB of reads in flight without holding registers for them. The 4 warps' states are folded in
// shared memory (over the stage buffers); the chunk's output is normalised and written with its
// base-2 log-sum-exp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/flash_decode/decode_kernels.cuh"

namespace tilelink::ops::decode {

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = 32 * kMmaWarps;
constexpr int kMmaTokens = 16;  // per warp and step
constexpr int kStages = 3;      // K and V steps in flight per warp (cp.async into shared memory)

// A warp's copy of one step: K then V, each [2 tiles][D / 32 pieces][32 lanes] x 16 bytes, laid
// out by the lane that reads it back (conflict-free both ways).
template <int D>
struct MmaStage {
  uint4 k[2][D / 32][32];
  uint4 v[2][D / 32][32];
};

template <int D>
struct MmaSmem {
  float wm[kMmaWarps][16], wl[kMmaWarps][16];
  union {
    MmaStage<D> stage[kMmaWarps][kStages];  // the main loop
    float wacc[kMmaWarps][16][D];           // the fold, after it
  };
};

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool live) {
  const uint32_t dst = uint32_t(__cvta_generic_to_shared(smem));
  // L2::256B: a row of one head is 256 bytes, all of which the warp reads; fetching it whole from
  // DRAM at once keeps the accesses long.
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(live ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t transpose_8x8(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <class T, int D>
__global__ void __launch_bounds__(kMmaThreads) decode_partial_mma_kernel(const PartialParams p) {
  constexpr int kChunks = D / 32;  // 32-dimension pieces of a row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  MmaSmem<D>& sm = *reinterpret_cast<MmaSmem<D>*>(smem_raw);
  const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

  // Q's A fragments: rows g and g + 8 (heads of this kv head; zero past G), dimensions t4*8.. of
  // every 32 (the same permutation as K's loads).
  const T* q_rows = static_cast<const T*>(p.q) + (int64_t(b) * p.q_heads + int64_t(hk) * p.g) * D;
  uint32_t qa[kChunks][2][4];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const uint4 lo = g < p.g ? __ldg(reinterpret_cast<const uint4*>(q_rows + int64_t(g) * D + c * 32 + t4 * 8)) : zero;
    const uint4 hi =
        g + 8 < p.g ? __ldg(reinterpret_cast<const uint4*>(q_rows + int64_t(g + 8) * D + c * 32 + t4 * 8)) : zero;
    qa[c][0][0] = lo.x, qa[c][0][1] = hi.x, qa[c][0][2] = lo.y, qa[c][0][3] = hi.y;
    qa[c][1][0] = lo.z, qa[c][1][1] = hi.z, qa[c][1][2] = lo.w, qa[c][1][3] = hi.w;
  }

  const int64_t t0 = int64_t(split) * p.chunk;
  const int64_t t1 = t0 + p.chunk < p.kv_len ? t0 + p.chunk : p.kv_len;
  const int64_t row_stride = int64_t(p.kv_heads) * D;
  const T* k_seq = static_cast<const T*>(p.k) + int64_t(b) * p.kv_len * row_stride + int64_t(hk) * D;
  const T* v_seq = static_cast<const T*>(p.v) + int64_t(b) * p.kv_len * row_stride + int64_t(hk) * D;

  float acc[kChunks * 4][4];
#pragma unroll
  for (int n = 0; n < kChunks * 4; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;  // rows g and g + 8

  // Step i of this warp covers tokens t0 + (i * kMmaWarps + warp) * 16 ... + 16.
  const int64_t step_tokens = int64_t(kMmaWarps) * kMmaTokens;
  const int64_t steps = t1 > t0 + int64_t(warp) * kMmaTokens
                            ? (t1 - t0 - int64_t(warp) * kMmaTokens + step_tokens - 1) / step_tokens
                            : 0;
  auto issue = [&](int64_t i) {
    if (i < steps) {
      MmaStage<D>& st = sm.stage[warp][i % kStages];
      const int64_t first = t0 + i * step_tokens + int64_t(warp) * kMmaTokens;
#pragma unroll
      for (int tile = 0; tile < 2; ++tile) {
        const int64_t tok = first + tile * 8 + g;
        const bool live = tok < t1;
        const int64_t row = (live ? tok : 0) * row_stride + t4 * 8;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          cp_async_16(&st.k[tile][c][lane], k_seq + row + c * 32, live);
          cp_async_16(&st.v[tile][c][lane], v_seq + row + c * 32, live);
        }
      }
    }
    cp_async_commit();  // an empty group past the end keeps the count of groups in step
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i);
  for (int64_t i = 0; i < steps; ++i) {
    issue(i + kStages - 1);
    cp_async_wait<kStages - 1>();
    __syncwarp();
    const int64_t base = t0 + i * step_tokens + int64_t(warp) * kMmaTokens;
    const MmaStage<D>& st = sm.stage[warp][i % kStages];
    uint4 kraw[2][kChunks], vraw[2][kChunks];
#pragma unroll
    for (int tile = 0; tile < 2; ++tile)
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        kraw[tile][c] = st.k[tile][c][lane];
        vraw[tile][c] = st.v[tile][c][lane];
      }
    __syncwarp();  // the stage may be refilled from here on
    // Scores.
    float s[2][4];
#pragma unroll
    for (int tile = 0; tile < 2; ++tile) {
      s[tile][0] = s[tile][1] = s[tile][2] = s[tile][3] = 0.0f;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        mma_16816<T>(s[tile], qa[c][0], kraw[tile][c].x, kraw[tile][c].y);
        mma_16816<T>(s[tile], qa[c][1], kraw[tile][c].z, kraw[tile][c].w);
      }
    }
    // Online softmax. Columns of the fragments: tokens base + tile*8 + t4*2 + e.
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
    for (int tile = 0; tile < 2; ++tile)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool live = base + tile * 8 + t4 * 2 + e < t1;
        s[tile][e] = live ? s[tile][e] * p.scale_log2 : -INFINITY;
        s[tile][2 + e] = live ? s[tile][2 + e] * p.scale_log2 : -INFINITY;
        mx_lo = fmaxf(mx_lo, s[tile][e]);
        mx_hi = fmaxf(mx_hi, s[tile][2 + e]);
      }
#pragma unroll
    for (int x = 1; x <= 2; x *= 2) {
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, x));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, x));
    }
    const float new_lo = fmaxf(m_lo, mx_lo), new_hi = fmaxf(m_hi, mx_hi);
    const float corr_lo = new_lo == -INFINITY ? 1.0f : exp2f(m_lo - new_lo);
    const float corr_hi = new_hi == -INFINITY ? 1.0f : exp2f(m_hi - new_hi);
    m_lo = new_lo;
    m_hi = new_hi;
    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int tile = 0; tile < 2; ++tile)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[tile][e] = s[tile][e] == -INFINITY ? 0.0f : exp2f(s[tile][e] - new_lo);
        s[tile][2 + e] = s[tile][2 + e] == -INFINITY ? 0.0f : exp2f(s[tile][2 + e] - new_hi);
        sum_lo += s[tile][e];
        sum_hi += s[tile][2 + e];
      }
    l_lo = l_lo * corr_lo + sum_lo;  // this lane's columns only; the quad is summed at the end
    l_hi = l_hi * corr_hi + sum_hi;
#pragma unroll
    for (int n = 0; n < kChunks * 4; ++n) {
      acc[n][0] *= corr_lo;
      acc[n][1] *= corr_lo;
      acc[n][2] *= corr_hi;
      acc[n][3] *= corr_hi;
    }
    // O += P · V.
    const uint32_t pa[4] = {pack2<T>(s[0][0], s[0][1]), pack2<T>(s[0][2], s[0][3]), pack2<T>(s[1][0], s[1][1]),
                            pack2<T>(s[1][2], s[1][3])};
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        mma_16816<T>(acc[c * 4 + r], pa, transpose_8x8(word(vraw[0][c], r)), transpose_8x8(word(vraw[1][c], r)));
  }
#pragma unroll
  for (int x = 1; x <= 2; x *= 2) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, x);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, x);
  }

  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its stages: wacc reuses them

  // Fold the warps. Output column j of n-tile (c, r) is dimension c*32 + (j/2)*8 + 2r + j%2; this
  // lane holds columns t4*2 + e.
  if (t4 == 0) {
    sm.wm[warp][g] = m_lo;
    sm.wm[warp][g + 8] = m_hi;
    sm.wl[warp][g] = l_lo;
    sm.wl[warp][g + 8] = l_hi;
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c)
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int dim = c * 32 + t4 * 8 + 2 * r + e;
        sm.wacc[warp][g][dim] = acc[c * 4 + r][e];
        sm.wacc[warp][g + 8][dim] = acc[c * 4 + r][2 + e];
      }
  __syncthreads();
  for (int i = threadIdx.x; i < p.g * D; i += kMmaThreads) {
    const int h = i / D, d = i % D;
    float mx = -INFINITY;
    for (int w = 0; w < kMmaWarps; ++w) mx = fmaxf(mx, sm.wm[w][h]);
    float o = 0.0f, lse = -INFINITY;
    if (mx != -INFINITY) {
      float sum = 0.0f;
      for (int w = 0; w < kMmaWarps; ++w) {
        const float f = exp2f(sm.wm[w][h] - mx);
        sum += sm.wl[w][h] * f;
        o += sm.wacc[w][h][d] * f;
      }
      o /= sum;
      lse = mx + log2f(sum);
    }
    const int64_t row = (int64_t(split) * p.batch + b) * p.q_heads + int64_t(hk) * p.g + h;
    p.part_o[row * D + d] = o;
    if (d == 0) p.part_lse[row] = lse;
  }
}

}  // namespace tilelink::ops::decode
