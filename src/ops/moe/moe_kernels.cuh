// src/ops/moe/moe_kernels.cuh — the data movement of the mixture-of-experts ops on SMs.
//
//   moe_gather_kernel   tokens into expert-sorted rows, chunk by chunk (chunk c = the tokens of
//                       rank (me + c) % world, read from its symmetric staging buffer once it said
//                       they are there); each block publishes its share of a chunk in its own
//                       slot, which the grouped GEMM's tiles of that chunk wait for. With `pulled`,
//                       a peer's tokens first cross the link once (each block pulls a share into
//                       this rank's copy, publishing it in a pull slot), and the sorted rows are
//                       then read locally: a token routed to topk experts is read topk times.
//                       With `pushed_slots`, the peers pushed their tokens into `pulled`
//                       themselves (over NVSHMEM): the block waits for their chunks instead.
//   moe_unsort_kernel   expert-sorted output rows back to token order (t * topk + j); rows of
//                       invalid expert ids become NaN.
// Both ops include it; the kernels are static (each translation unit launches its own copy).
#pragma once

#include <cstdint>

#include "tilelink/tile.cuh"

namespace tilelink::ops {

inline constexpr int kMoeThreads = 512;

struct MoeGatherParams {
  ll::Team team;
  tile::GroupChunkMapping map;  // chunks = world, groups_per_chunk = experts, producers = blocks
  const char* source;           // symmetric [tokens_per_rank, hidden] staging (or, with from_self,
                                // a local [world * tokens_per_rank, hidden] tensor read by token)
  char* sorted;                 // [entries, hidden]
  const int32_t* sorted_entry;
  const int32_t* group_end;
  const int32_t* row_of_entry;  // with from_self: source row of entry i (nullptr: row i / topk)
  int32_t topk;
  int64_t tokens_per_rank;
  int64_t row_bytes;
  uint64_t* chunk_slots;  // local, map.num_tiles(); nullptr: nobody waits (the GEMM follows in stream order)
  const uint64_t* ready;  // one slot per rank: its staging holds this call's tokens
  bool from_self;         // every token is local (one rank, or gathered before): no waits
  char* pulled = nullptr;          // local [world * tokens_per_rank, hidden]: peers' tokens pulled
                                   // once before sorting (nullptr: sort straight from the peers)
  uint64_t* pull_slots = nullptr;  // local, map.num_tiles(): block b pulled its share of chunk c
  const uint64_t* pushed_slots = nullptr;  // local: the peers' pushes into `pulled`, per chunk of
  tile::RowChunkMapping pushed_map{};      // pushed_map (nullptr: this rank pulls)
};

#if defined(__CUDACC__)
static __global__ void __launch_bounds__(kMoeThreads) moe_gather_kernel(const MoeGatherParams p) {
  const int32_t world = p.team.num_ranks, me = p.team.rank, experts = p.map.groups_per_chunk;
  for (int32_t c = 0; c < p.map.chunks; ++c) {
    const int32_t src = (me + c) % world;
    int32_t from = p.from_self ? me : src;
    if (!p.from_self && src != me) tile::rank_wait(tile::Block{}, p.team, p.ready, src);
    const char* source = p.source;
    int64_t first_token = p.from_self ? 0 : int64_t(src) * p.tokens_per_rank;
    if (p.pulled != nullptr && src != me) {
      const int64_t t = p.tokens_per_rank;
      if (p.pushed_slots != nullptr) {
        tile::consumer_tile_wait(tile::Block{}, p.team, p.pushed_map, p.pushed_slots,
                                 tile::RowRange{int32_t(src * t), int32_t(t)});
      } else {
        const int32_t lo = int32_t(t * blockIdx.x / gridDim.x), hi = int32_t(t * (blockIdx.x + 1) / gridDim.x);
        tile::tile_gather_rows(tile::Block{}, p.team, p.pulled + first_token * p.row_bytes, p.source, p.row_bytes,
                               lo, hi, [](int32_t i) { return int64_t(i); }, src);
        tile::producer_tile_notify<tile::Notify::local>(tile::Block{}, p.team, p.map, p.pull_slots,
                                                        p.map.tile(c, blockIdx.x));
        // Every block's share of chunk c (the slots of the chunk's first group are the chunk's).
        tile::consumer_tile_wait(tile::Block{}, p.team, p.map, p.pull_slots, c * experts);
      }
      source = p.pulled;
      first_token = 0;
      from = me;
    }
    const int32_t begin = c == 0 ? 0 : p.group_end[c * experts - 1];
    const int32_t end = p.group_end[c * experts + experts - 1];
    const int64_t rows = end - begin;
    const int32_t lo = begin + int32_t(rows * blockIdx.x / gridDim.x);
    const int32_t hi = begin + int32_t(rows * (blockIdx.x + 1) / gridDim.x);
    tile::tile_gather_rows(
        tile::Block{}, p.team, p.sorted, source, p.row_bytes, lo, hi,
        [&](int32_t i) {
          const int32_t entry = p.sorted_entry[i];
          return p.row_of_entry ? int64_t(p.row_of_entry[entry]) : int64_t(entry / p.topk) - first_token;
        },
        from);
    if (p.chunk_slots != nullptr)
      tile::producer_tile_notify<tile::Notify::local>(tile::Block{}, p.team, p.map, p.chunk_slots,
                                                      p.map.tile(c, blockIdx.x));
  }
}

// One warp per output row, 16-byte vectors (row_bytes is a multiple of 16).
static __global__ void __launch_bounds__(256) moe_unsort_kernel(char* out, const char* sorted, const int32_t* entry_row,
                                                         int64_t entries, int64_t row_bytes) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t i = warp; i < entries; i += warps) {
    const int32_t r = entry_row[i];
    uint4* dst = reinterpret_cast<uint4*>(out + i * row_bytes);
    if (r < 0) {
      const uint4 nan{0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u};  // NaN in bf16 and fp16 alike
      for (int64_t v = lane; v < row_bytes / 16; v += 32) dst[v] = nan;
    } else {
      const uint4* src = reinterpret_cast<const uint4*>(sorted + int64_t(r) * row_bytes);
      for (int64_t v = lane; v < row_bytes / 16; v += 32) dst[v] = src[v];
    }
  }
}
#endif

}  // namespace tilelink::ops
