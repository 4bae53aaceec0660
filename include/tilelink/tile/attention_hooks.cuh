// tilelink/tile/attention_hooks.cuh — the tile primitives, bound to the attention kernel's hook
// (attention/fmha_kernel.cuh calls before_kv_tile on its producer thread).
//
//   GatherKvWait — consumer of an AllGather of K and V (the sequence-parallel op): a key tile
//                  waits for the chunks of K and of V its rows come from.
//
// The gathered K and V are [ranks][batch x rows_per_batch][kv_heads x head_dim]: rank s's shard,
// batch-major, in its slot; the kernel addresses a key row of batch b as (row + b x rows_per_batch)
// of that layout, which is the gathered row the RowChunkMapping publishes in chunks.
#pragma once

#include <cstdint>

#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/team.cuh"
#include "tilelink/tile/mapping.cuh"
#include "tilelink/tile/signal.cuh"

namespace tilelink::tile {

struct GatherKvWait {
  ll::Team team;
  RowChunkMapping map;       // rows_per_rank = batch x rows_per_batch
  const uint64_t* k_signals;  // one slot per chunk of the gathered K; nullptr: nothing to wait for
  const uint64_t* v_signals;  // the same for V
  int64_t rows_per_batch;

#if defined(__CUDACC__)
  // The producer's one thread, before the tile's TMA loads: acquire both tensors' chunks, then
  // order the async-proxy (TMA) reads after the acquire.
  TL_DEVICE void before_kv_tile(int /*segment*/, int batch, int64_t row, int64_t rows) const {
    if (k_signals == nullptr) return;
    const RowRange rr{int32_t(row + int64_t(batch) * rows_per_batch), int32_t(rows)};
    consumer_tile_wait(Thread{}, team, map, k_signals, rr);
    consumer_tile_wait(Thread{}, team, map, v_signals, rr);
    ll::fence_proxy_async_global();
  }
#endif
};

}  // namespace tilelink::tile
