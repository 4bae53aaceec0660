// tilelink/ops/ag_gemm/gather_kernel.cuh — the communication side of AllGather-GEMM on SMs.
//
// A few blocks move the other ranks' rows of A into this rank's gathered A, chunk by chunk, in
// ring order (step s: push my rows to rank r-s, or pull the rows of rank r+s), publishing each
// chunk as it lands. The GEMM side (GatherWaitHooks) waits on exactly those chunk slots, visiting
// its own rows first, then r+1, r+2, … — the order the chunks arrive in.
// Also the gather of sequence-parallel attention (one launch per gathered tensor). A template
// only so that several translation units may include it.
#pragma once

#include <cstdint>

#include "tilelink/ops/common.hpp"
#include "tilelink/tile.cuh"

namespace tilelink::ops {

struct AgGatherParams {
  ll::Team team;
  tile::RowChunkMapping map;
  char* gathered;           // symmetric [world * rows_per_rank, K]
  const char* a_local;      // this rank's rows (source of pushes)
  int64_t row_bytes;        // K * element size
  uint64_t* chunk_signals;  // symmetric, one slot per chunk (map.notify_slot)
  const uint64_t* ready;    // symmetric, one slot per rank: "rank q is ready for this call"
  CommMode mode;
};

inline constexpr int kGatherThreads = 512;

#if defined(__CUDACC__)
template <int = 0>
__global__ void __launch_bounds__(kGatherThreads) ag_gather_kernel(const AgGatherParams p) {
  const int world = p.team.num_ranks, me = p.team.rank, chunks = p.map.chunks_per_rank;
  for (int item = blockIdx.x; item < (world - 1) * chunks; item += gridDim.x) {
    const int step = 1 + item / chunks, chunk = item % chunks;
    if (p.mode == CommMode::push) {
      // My rows go to the rank that consumes them at this step; it said its buffer is free.
      const int to = tile::ring_prev(me, step, world);
      tile::rank_wait(tile::Block{}, p.team, p.ready, to);
      tile::tile_push_data(tile::Block{}, p.team, p.map, p.map.tile(me, chunk), p.gathered, p.a_local,
                                 int64_t(me) * p.map.rows_per_rank, p.row_bytes, p.chunk_signals, to);
    } else {
      // I fetch the rows of the rank I consume at this step, once it said they are in place.
      const int from = tile::ring_next(me, step, world);
      tile::rank_wait(tile::Block{}, p.team, p.ready, from);
      tile::tile_pull_data(tile::Block{}, p.team, p.map, p.map.tile(from, chunk), p.gathered, p.gathered,
                                 p.row_bytes, p.chunk_signals, from);
    }
  }
}

#endif

}  // namespace tilelink::ops
