// tilelink/ops/flash_decode/flash_decode.hpp — decode attention over a KV cache split across ranks.
//
//   out[b, h, :] = softmax(scale · q[b, h, :] · K[b, :, h / G, :]ᵀ) · V[b, :, h / G, :]   on every rank
//
// where K and V are the concatenation over ranks (in rank order) of each rank's shard of the
// cache, and G = q_heads / kv_heads (grouped-query attention: query head h reads kv head h / G).
// Each rank runs a split-KV decode kernel over its own shard (flash-decoding: the shard is cut
// into chunks that run in parallel, each with its own online softmax), folds the chunks into one
// partial result and its log-sum-exp, and the ranks exchange those with the low-latency
// AllGather (allgather_ll); a last kernel combines them. All on the device, no host round trip.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/ops/common.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink {

struct FlashDecodeArgs {
  DType dtype = DType::bf16;
  const void* q = nullptr;  // [batch, q_heads, head_dim], the same on every rank
  const void* k = nullptr;  // [batch, kv_len, kv_heads, head_dim], this rank's shard of the cache
  const void* v = nullptr;  // [batch, kv_len, kv_heads, head_dim]
  void* out = nullptr;      // [batch, q_heads, head_dim], on every rank
  int64_t batch = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t kv_len = 0;       // this rank's tokens per sequence (may differ between ranks, may be 0)
  float scale = 0.0f;       // 0: 1 / sqrt(head_dim)
};

struct FlashDecodeOptions {
  int splits = 0;  // chunks of this rank's shard per (sequence, kv head); 0: enough to fill the GPU
  std::optional<cudaStream_t> stream;
};

// head_dim 64 or 128; q_heads a multiple of kv_heads with at most 16 query heads per kv head.
void flash_decode(Context& ctx, const FlashDecodeArgs& args, const FlashDecodeOptions& options = {});

}  // namespace tilelink
