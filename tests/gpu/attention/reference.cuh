// tests/gpu/attention/reference.cuh — attention in fp32 on the GPU, one block per query row:
// the test's ground truth (inputs are the kernel's own bf16/fp16 tensors, so only the kernel's
// rounding of P and of the output separates the two).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <climits>

namespace tltest {

struct ReferenceShape {
  int64_t batch, q_len, kv_len, q_heads, kv_heads, head_dim;
  int64_t q_stride[3], k_stride[3], v_stride[3];  // {batch, row, head}, elements
  bool causal;
  int64_t q_position0;
  float scale;
  // Query i's position: i + q_position0 below q_split, i - q_split + q_position_after from there
  // (the two chunks a rank holds under zig-zag sharding). Keys are at positions 0, 1, ...
  int64_t q_split = INT64_MAX, q_position_after = 0;
};

inline __device__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
inline __device__ float to_float(__half x) { return __half2float(x); }

// Grid (q_len, q_heads, batch), 128 threads, dynamic shared memory kv_len floats.
// out: contiguous [batch, q_len, q_heads, head_dim] fp32; lse: [batch, q_heads, q_len].
template <class T>
__global__ void attention_reference_kernel(const T* q, const T* k, const T* v, float* out, float* lse,
                                           ReferenceShape s) {
  extern __shared__ float scores[];
  __shared__ float red[128];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hk = h / (s.q_heads / s.kv_heads);
  const T* qrow = q + b * s.q_stride[0] + i * s.q_stride[1] + h * s.q_stride[2];
  float local_max = -INFINITY;
  for (int64_t j = threadIdx.x; j < s.kv_len; j += blockDim.x) {
    const T* krow = k + b * s.k_stride[0] + j * s.k_stride[1] + hk * s.k_stride[2];
    float dot = 0.0f;
    for (int64_t c = 0; c < s.head_dim; ++c) dot = fmaf(to_float(qrow[c]), to_float(krow[c]), dot);
    const int64_t position = i < s.q_split ? i + s.q_position0 : i - s.q_split + s.q_position_after;
    const bool hidden = s.causal && j > position;
    scores[j] = hidden ? -INFINITY : dot * s.scale;
    local_max = fmaxf(local_max, scores[j]);
  }
  red[threadIdx.x] = local_max;
  __syncthreads();
  for (int w = 64; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  const float m = red[0];
  __syncthreads();
  float local_sum = 0.0f;
  for (int64_t j = threadIdx.x; j < s.kv_len; j += blockDim.x) {
    scores[j] = m == -INFINITY ? 0.0f : expf(scores[j] - m);
    local_sum += scores[j];
  }
  red[threadIdx.x] = local_sum;
  __syncthreads();
  for (int w = 64; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  const float l = red[0];
  float* orow = out + ((b * s.q_len + i) * s.q_heads + h) * s.head_dim;
  for (int64_t c = threadIdx.x; c < s.head_dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < s.kv_len; ++j)
      acc = fmaf(scores[j], to_float(v[b * s.v_stride[0] + j * s.v_stride[1] + hk * s.v_stride[2] + c]), acc);
    orow[c] = l > 0.0f ? acc / l : 0.0f;
  }
  if (threadIdx.x == 0) lse[(b * s.q_heads + h) * s.q_len + i] = l > 0.0f ? m + logf(l) : -INFINITY;
}

}  // namespace tltest
