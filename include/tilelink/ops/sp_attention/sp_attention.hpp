// tilelink/ops/sp_attention/sp_attention.hpp — sequence-parallel attention: every rank holds the
// queries, keys and values of its shard of each sequence and gets its queries' attention over the
// whole sequence.
//
//   out = softmax(scale · q · K_allᵀ + mask) · V_all   (this rank's rows), lse likewise
//
// K_all and V_all are every rank's shard, gathered chunk by chunk into symmetric buffers (the copy
// engine, or a few SMs, push this rank's shard to every peer) while the attention kernel runs:
// its key tiles visit this rank's own shard first and each peer's as its chunks land (each tile
// waits only for the chunks it reads). With a causal mask the shards are compared by position,
// so any sharding of the sequence works; the zig-zag one balances the work: with W ranks the
// sequence is cut into 2W chunks and rank r holds chunks r and 2W-1-r (in that order), so every
// rank has as many (query, visible key) pairs as every other.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/ops/common.hpp"
#include "tilelink/ops/path.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink {

enum class SequenceSharding : int32_t {
  contiguous = 0,  // rank r holds positions [r·L, (r+1)·L)
  zigzag = 1,      // rank r holds chunks r and 2W-1-r of length L/2 (L even)
};

struct SpAttentionArgs {
  DType dtype = DType::bf16;
  const void* q = nullptr;  // [batch, local_len, q_heads, head_dim], contiguous
  const void* k = nullptr;  // [batch, local_len, kv_heads, head_dim], contiguous
  const void* v = nullptr;  // [batch, local_len, kv_heads, head_dim], contiguous
  void* out = nullptr;      // [batch, local_len, q_heads, head_dim]
  float* lse = nullptr;     // [batch, q_heads, local_len] fp32 (natural log); may be null
  int64_t batch = 0, local_len = 0, q_heads = 0, kv_heads = 0, head_dim = 0;  // the same on every rank
  bool causal = false;
  SequenceSharding sharding = SequenceSharding::zigzag;
  float scale = 0.0f;  // 0: 1 / sqrt(head_dim)
};

struct SpAttentionOptions {
  OpPath path = OpPath::automatic;  // decomposed: NCCL all-gather of K and V, then the kernel
  CommEngine engine = CommEngine::copy_engine;  // fused: who moves the chunks (SMs when capturing,
                                                // and where peers are reached through NVSHMEM)
  int comm_sms = 0;    // engine sm: blocks of the gather kernel (0: the op's choice)
  int chunk_rows = 0;  // rows (tokens of one sequence x batch) per published chunk; 0: the op's choice
  std::optional<cudaStream_t> stream;
};

// head_dim 64 or 128, q_heads a multiple of kv_heads, K and V finite. Collective: every rank calls
// it with the same shape; a refused argument on any rank fails the call on every rank.
void sp_attention(Context& ctx, const SpAttentionArgs& args, const SpAttentionOptions& options = {});

// What the automatic path picks (the same on every rank).
OpPath sp_attention_choose_path(const Context& ctx, const SpAttentionArgs& args);

}  // namespace tilelink
