// tilelink/tile/signal.cuh — the six signal primitives of the tile layer.
//
//   producer_tile_notify<Notify>(team, map, signals, tile)   release a finished tile
//   consumer_tile_wait(team, map, signals, region)            acquire every tile a region needs
//   peer_tile_notify(team, map, peer_signals, tile, dst)      tell rank dst my tile is ready
//   peer_tile_wait(team, map, peer_signals, tile, src)        wait until rank src told me
//   rank_notify(team, rank_signals, dst)                      coarse: my whole part is ready
//   rank_wait(team, rank_signals, src[, value])               coarse wait on rank src
//   count_arm / count_notify / count_wait                     "n producers of this call are done"
//
// Lowering: a Mapping turns the tile id into slot numbers and ranks (mapping.cuh); signals are
// epoch flags (ll/signal.cuh): notify raises the slot to the call's epoch (ll::call_epoch) with
// a release red.max, wait spins (bounded) until the slot holds at least that epoch (acquire).
// The stream-ordered forms (for copy-engine paths and hand-overs between calls) are in
// stream_signal.cuh. Notifying with max
// rather than a store matters when consecutive calls lay their slots out differently (another
// shape or algorithm): a rank still finishing call e-1 may write a slot that a faster peer has
// already raised to e for call e; a store would lower it and strand the waiter (seen on the H200
// with 8 ranks: a full-mesh pull after a ring call), max cannot. Functions without a
// suffix are executed by ONE thread; `_block` variants are called by the whole block and put the
// block barrier where the memory model needs it (before a notify, after a wait).
//
// Signal arrays: `signals` has one slot per tile (map.notify_slot), `peer_signals` one slot per
// (tile, source rank) so several ranks can notify the same tile independently, `rank_signals`
// one slot per rank.
#pragma once

#include <cstdint>

#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/tile/mapping.cuh"

namespace tilelink::tile {

// Whom producer_tile_notify releases a tile to.
enum class Notify {
  local,     // a consumer on this rank (same GPU): gpu-scope release into this rank's slot
  owner,     // the rank map.owner(tile) consumes it: sys-scope release into the owner's slot
  all_ranks  // every rank consumes it: sys-scope release into the slot on every rank
};

#if defined(__CUDACC__)

template <Notify Mode, class Mapping>
TL_DEVICE void producer_tile_notify(const ll::Team& team, const Mapping& map, uint64_t* signals,
                                    int32_t tile) {
  static_assert(ProducerMapping<Mapping>,
                "producer_tile_notify: Mapping must provide notify_slot(tile) and owner(tile)");
  uint64_t* slot = signals + map.notify_slot(tile);
  const uint64_t epoch = ll::call_epoch(team);
  if constexpr (Mode == Notify::local) {
    ll::red_max_release_gpu(slot, epoch);
  } else if constexpr (Mode == Notify::owner) {
    ll::signal_op<ll::Scope::sys>(team, slot, epoch, ll::SignalOp::max, map.owner(tile));
  } else {
    for (int r = 0; r < team.num_ranks; ++r) ll::signal_op<ll::Scope::sys>(team, slot, epoch, ll::SignalOp::max, r);
  }
}

template <class Mapping, class Region>
TL_DEVICE void consumer_tile_wait(const ll::Team& team, const Mapping& map, const uint64_t* signals,
                                  Region region) {
  static_assert(ConsumerMapping<Mapping, Region>,
                "consumer_tile_wait: Mapping must provide SlotRange wait_slots(Region)");
  SlotRange deps = map.wait_slots(region);
  const uint64_t epoch = ll::call_epoch(team);
  for (int32_t s = deps.begin; s < deps.end; ++s)
    ll::signal_wait_until<ll::Scope::sys>(team, signals + s, ll::Cmp::ge, epoch,
                                          ll::WaitSite{s, "consumer_tile_wait"});
}

template <class Mapping>
TL_DEVICE void peer_tile_notify(const ll::Team& team, const Mapping& map, uint64_t* peer_signals,
                                int32_t tile, int32_t dst) {
  static_assert(ProducerMapping<Mapping>, "peer_tile_notify: Mapping must provide notify_slot(tile)");
  uint64_t* slot = peer_signals + int64_t(map.notify_slot(tile)) * team.num_ranks + team.rank;
  ll::signal_op<ll::Scope::sys>(team, slot, ll::call_epoch(team), ll::SignalOp::max, dst);
}

template <class Mapping>
TL_DEVICE void peer_tile_wait(const ll::Team& team, const Mapping& map, const uint64_t* peer_signals,
                              int32_t tile, int32_t src) {
  static_assert(ProducerMapping<Mapping>, "peer_tile_wait: Mapping must provide notify_slot(tile)");
  const uint64_t* slot = peer_signals + int64_t(map.notify_slot(tile)) * team.num_ranks + src;
  ll::signal_wait_until<ll::Scope::sys>(team, slot, ll::Cmp::ge, ll::call_epoch(team),
                                        ll::WaitSite{tile, "peer_tile_wait"});
}

TL_DEVICE void rank_notify(const ll::Team& team, uint64_t* rank_signals, int32_t dst) {
  ll::signal_op<ll::Scope::sys>(team, rank_signals + team.rank, ll::call_epoch(team), ll::SignalOp::max, dst);
}

// Waits until rank `src` notified this rank for call `value` (default: the current call).
TL_DEVICE void rank_wait(const ll::Team& team, const uint64_t* rank_signals, int32_t src,
                         uint64_t value) {
  ll::signal_wait_until<ll::Scope::sys>(team, rank_signals + src, ll::Cmp::ge, value,
                                        ll::WaitSite{src, "rank_wait"});
}
TL_DEVICE void rank_wait(const ll::Team& team, const uint64_t* rank_signals, int32_t src) {
  rank_wait(team, rank_signals, src, ll::call_epoch(team));
}

// ---- counting signals -----------------------------------------------------------------------
// For producers whose number only the device knows (the tiles of a grouped GEMM over a routing
// built on the device): a local slot armed in stream order before the call's producers run,
// raised by one per finished producer, awaited until it reaches armed + expected. The call's epoch
// sits in the high half of the armed value, so a count an earlier (even aborted) call left behind
// never satisfies a later wait.
TL_DEVICE uint64_t count_base(const ll::Team& team) { return ll::call_epoch(team) << 32; }
// One thread, in stream order before every producer and consumer of the slot in this call.
TL_DEVICE void count_arm(const ll::Team& team, uint64_t* slot) { ll::st_relaxed_gpu(slot, count_base(team)); }
// One thread, after its producer's writes (release, gpu scope: the consumer is on this GPU).
TL_DEVICE void count_notify(uint64_t* slot) { ll::red_add_release_gpu(slot, 1); }
TL_DEVICE void count_wait(const ll::Team& team, const uint64_t* slot, uint32_t expected, int32_t site_tile) {
  ll::signal_wait_until<ll::Scope::gpu>(team, slot, ll::Cmp::ge, count_base(team) + expected,
                                        ll::WaitSite{site_tile, "count_wait"});
}

// ---- whole-block variants ------------------------------------------------------------------
// Every thread's writes of the tile happen before the barrier; thread 0's release is cumulative
// over what the barrier made visible to it, so one store publishes the whole block's work.
template <Notify Mode, class Mapping>
TL_DEVICE void producer_tile_notify_block(const ll::Team& team, const Mapping& map,
                                          uint64_t* signals, int32_t tile) {
  __syncthreads();
  if (threadIdx.x == 0) {
    if constexpr (Mode != Notify::local) ll::fence_acq_rel_sys();
    producer_tile_notify<Mode>(team, map, signals, tile);
  }
}

template <class Mapping, class Region>
TL_DEVICE void consumer_tile_wait_block(const ll::Team& team, const Mapping& map,
                                        const uint64_t* signals, Region region) {
  if (threadIdx.x == 0) consumer_tile_wait(team, map, signals, region);
  __syncthreads();
}

template <class Mapping>
TL_DEVICE void peer_tile_notify_block(const ll::Team& team, const Mapping& map,
                                      uint64_t* peer_signals, int32_t tile, int32_t dst) {
  __syncthreads();
  if (threadIdx.x == 0) {
    ll::fence_acq_rel_sys();
    peer_tile_notify(team, map, peer_signals, tile, dst);
  }
}

TL_DEVICE void rank_wait_block(const ll::Team& team, const uint64_t* rank_signals, int32_t src) {
  if (threadIdx.x == 0) rank_wait(team, rank_signals, src);
  __syncthreads();
}

template <class Mapping>
TL_DEVICE void peer_tile_wait_block(const ll::Team& team, const Mapping& map,
                                    const uint64_t* peer_signals, int32_t tile, int32_t src) {
  if (threadIdx.x == 0) peer_tile_wait(team, map, peer_signals, tile, src);
  __syncthreads();
}

#endif  // __CUDACC__

}  // namespace tilelink::tile
