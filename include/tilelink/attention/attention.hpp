// tilelink/attention/attention.hpp — attention forward on one GPU (the kernel the sequence-parallel
// op runs on every rank).
//
//   out[b, i, h, :] = Σ_j softmax_j(scale · q[b, i, h, :] · k[b, j, h / G, :]) · v[b, j, h / G, :]
//   lse[b, h, i]    = log Σ_j exp(scale · q[b, i, h, :] · k[b, j, h / G, :])          (natural log)
//
// G = q_heads / kv_heads (grouped-query attention). With `causal`, key j is hidden from query i
// when j > i + q_position0: q_position0 = 0 is PyTorch SDPA's is_causal (top-left aligned),
// kv_len − q_len is FlashAttention's (bottom-right aligned). A query that sees no key gets a zero
// output and lse = −inf.
//
// Tensors are [batch, rows, heads, head_dim] with head_dim contiguous; the other strides are free
// (in elements, multiples of 8), so [batch, heads, rows, head_dim] tensors work too. A zero stride
// triple means contiguous [batch, rows, heads, head_dim].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tilelink/core/dtype.hpp"

namespace tilelink {

struct AttentionStrides {
  int64_t batch = 0, row = 0, head = 0;  // elements; all zero: contiguous [batch, rows, heads, head_dim]
};

struct AttentionArgs {
  DType dtype = DType::bf16;
  const void* q = nullptr;  // [batch, q_len, q_heads, head_dim]
  const void* k = nullptr;  // [batch, kv_len, kv_heads, head_dim]
  const void* v = nullptr;  // [batch, kv_len, kv_heads, head_dim]
  void* out = nullptr;      // [batch, q_len, q_heads, head_dim]
  float* lse = nullptr;     // [batch, q_heads, q_len] fp32, contiguous; may be null
  int64_t batch = 0, q_len = 0, kv_len = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  AttentionStrides q_stride, k_stride, v_stride, out_stride;
  bool causal = false;
  int64_t q_position0 = 0;  // causal only: the position of query 0 relative to key 0
  float scale = 0.0f;       // 0: 1 / sqrt(head_dim)
};

// head_dim 64 or 128, bf16 or fp16, q_heads a multiple of kv_heads, any q_len, kv_len >= 0.
// Bad arguments throw tilelink::Error before anything is launched. Runs on `stream`.
void attention_forward(const AttentionArgs& args, cudaStream_t stream);

}  // namespace tilelink
