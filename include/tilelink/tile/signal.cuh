// tilelink/tile/signal.cuh — the signal primitives of the tile layer.
//
//   producer_tile_notify<Notify>(coop, team, map, signals, tile)   release a finished tile
//   consumer_tile_wait<Spin>(coop, team, map, signals, region)      acquire every tile a region needs
//   peer_tile_notify(coop, team, map, peer_signals, tile, dst)      tell rank dst my tile is ready
//   peer_tile_wait(coop, team, map, peer_signals, tile, src)        wait until rank src told me
//   rank_notify(coop, team, rank_signals, dst)                      coarse: my whole part is ready
//   rank_wait(coop, team, rank_signals, src[, value])               coarse wait on rank src
//   reads_done_notify / reads_done_wait                             "my peers finished reading my buffer"
//   count_arm / count_notify / count_wait                           "n producers of this call are done"
//
// `coop` is the cooperation scope (coop.cuh: Thread, Warp, WarpSpan, Block): every member calls,
// the leader signals. A notify first syncs the scope, so every member's writes of the tile happen
// before the leader's release; a wait ends with the sync, so every member's reads come after the
// leader's acquire. Waits spin per their Spin policy (full by default; lean for a GEMM's producer
// warp).
//
// Lowering: a Mapping turns the tile id into slot numbers and ranks (mapping.cuh); signals are
// epoch flags (ll/signal.cuh): notify raises the slot to the call's epoch (ll::call_epoch) with
// a release red.max, wait spins (bounded) until the slot holds at least that epoch (acquire).
// The stream-ordered forms (for copy-engine paths and hand-overs between calls) are in
// stream_signal.cuh. Notifying with max rather than a store matters when consecutive calls lay
// their slots out differently (another shape or algorithm): a rank still finishing call e-1 may
// write a slot that a faster peer has already raised to e for call e; a store would lower it and
// strand the waiter (seen on the H200 with 8 ranks: a full-mesh pull after a ring call), max
// cannot.
//
// Signal arrays: `signals` has one slot per tile (map.notify_slot), `peer_signals` one slot per
// (tile, source rank) so several ranks can notify the same tile independently, `rank_signals`
// one slot per rank.
#pragma once

#include <cstdint>

#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/tile/coop.cuh"
#include "tilelink/tile/mapping.cuh"

namespace tilelink::tile {

// Whom producer_tile_notify releases a tile to.
enum class Notify {
  local,     // a consumer on this rank (same GPU): gpu-scope release into this rank's slot
  owner,     // the rank map.owner(tile) consumes it: sys-scope release into the owner's slot
  all_ranks  // every rank consumes it: sys-scope release into the slot on every rank
};

#if defined(__CUDACC__)

namespace detail {

// A release of a scope's writes to another rank: the leader's release is cumulative over what the
// barrier made visible to it; the fence makes that hold at system scope.
template <Coop C>
TL_DEVICE void fence_before_remote_release() {
  if constexpr (!C::kOneThread) ll::fence_acq_rel_sys();
}

// The leader's wait for one slot until it holds `value` (Spin::full).
TL_DEVICE void wait_slot(const ll::Team& team, const uint64_t* signals, int64_t slot, uint64_t value,
                         int64_t site_tile, const char* site) {
  ll::signal_wait_until<ll::Scope::sys>(team, signals + slot, ll::Cmp::ge, value, ll::WaitSite{site_tile, site});
}

}  // namespace detail

template <Notify Mode, Coop C, class Mapping>
TL_DEVICE void producer_tile_notify(C coop, const ll::Team& team, const Mapping& map, uint64_t* signals,
                                    int32_t tile) {
  static_assert(ProducerMapping<Mapping>,
                "producer_tile_notify: Mapping must provide notify_slot(tile) and owner(tile)");
  coop.sync();
  if (!coop.leader()) return;
  uint64_t* slot = signals + map.notify_slot(tile);
  const uint64_t epoch = ll::call_epoch(team);
  if constexpr (Mode == Notify::local) {
    ll::red_max_release_gpu(slot, epoch);
  } else if constexpr (Mode == Notify::owner) {
    detail::fence_before_remote_release<C>();
    ll::signal_op<ll::Scope::sys>(team, slot, epoch, ll::SignalOp::max, map.owner(tile));
  } else {
    detail::fence_before_remote_release<C>();
    for (int r = 0; r < team.num_ranks; ++r) ll::signal_op<ll::Scope::sys>(team, slot, epoch, ll::SignalOp::max, r);
  }
}

// Spin::lean needs `signals` to be this rank's own slots, which they are: consumers wait where
// producers notify them.
template <Spin S = Spin::full, Coop C, class Mapping, class Region>
TL_DEVICE void consumer_tile_wait(C coop, const ll::Team& team, const Mapping& map, const uint64_t* signals,
                                  Region region) {
  static_assert(ConsumerMapping<Mapping, Region>,
                "consumer_tile_wait: Mapping must provide SlotRange wait_slots(Region)");
  if (coop.leader()) {
    const SlotRange deps = map.wait_slots(region);
    const uint64_t epoch = ll::call_epoch(team);
    for (int32_t s = deps.begin; s < deps.end; ++s) {
      if constexpr (S == Spin::lean)
        ll::signal_wait_local_lean(team, signals, s, epoch, s, ll::LeanSite("consumer_tile_wait"));
      else
        detail::wait_slot(team, signals, s, epoch, s, "consumer_tile_wait");
    }
  }
  coop.sync();
}

template <Coop C, class Mapping>
TL_DEVICE void peer_tile_notify(C coop, const ll::Team& team, const Mapping& map, uint64_t* peer_signals,
                                int32_t tile, int32_t dst) {
  static_assert(ProducerMapping<Mapping>, "peer_tile_notify: Mapping must provide notify_slot(tile)");
  coop.sync();
  if (!coop.leader()) return;
  detail::fence_before_remote_release<C>();
  uint64_t* slot = peer_signals + int64_t(map.notify_slot(tile)) * team.num_ranks + team.rank;
  ll::signal_op<ll::Scope::sys>(team, slot, ll::call_epoch(team), ll::SignalOp::max, dst);
}

// Ranks [first, last] but `except` (-1: none): one notify's destinations, released with one fence.
struct RankSet {
  int32_t first, last, except = -1;
};

template <Coop C, class Mapping>
TL_DEVICE void peer_tile_notify(C coop, const ll::Team& team, const Mapping& map, uint64_t* peer_signals,
                                int32_t tile, RankSet dsts) {
  static_assert(ProducerMapping<Mapping>, "peer_tile_notify: Mapping must provide notify_slot(tile)");
  coop.sync();
  if (!coop.leader()) return;
  detail::fence_before_remote_release<C>();
  uint64_t* slot = peer_signals + int64_t(map.notify_slot(tile)) * team.num_ranks + team.rank;
  const uint64_t epoch = ll::call_epoch(team);
  for (int32_t r = dsts.first; r <= dsts.last; ++r)
    if (r != dsts.except) ll::signal_op<ll::Scope::sys>(team, slot, epoch, ll::SignalOp::max, r);
}

template <Coop C, class Mapping>
TL_DEVICE void peer_tile_wait(C coop, const ll::Team& team, const Mapping& map, const uint64_t* peer_signals,
                              int32_t tile, int32_t src) {
  static_assert(ProducerMapping<Mapping>, "peer_tile_wait: Mapping must provide notify_slot(tile)");
  if (coop.leader())
    detail::wait_slot(team, peer_signals, int64_t(map.notify_slot(tile)) * team.num_ranks + src,
                                  ll::call_epoch(team), tile, "peer_tile_wait");
  coop.sync();
}

template <Coop C>
TL_DEVICE void rank_notify(C coop, const ll::Team& team, uint64_t* rank_signals, int32_t dst) {
  coop.sync();
  if (!coop.leader()) return;
  detail::fence_before_remote_release<C>();
  ll::signal_op<ll::Scope::sys>(team, rank_signals + team.rank, ll::call_epoch(team), ll::SignalOp::max, dst);
}

// Waits until rank `src` notified this rank for call `value` (default: the current call).
template <Coop C>
TL_DEVICE void rank_wait(C coop, const ll::Team& team, const uint64_t* rank_signals, int32_t src, uint64_t value) {
  if (coop.leader()) detail::wait_slot(team, rank_signals, src, value, src, "rank_wait");
  coop.sync();
}
template <Coop C>
TL_DEVICE void rank_wait(C coop, const ll::Team& team, const uint64_t* rank_signals, int32_t src) {
  rank_wait(coop, team, rank_signals, src, ll::call_epoch(team));
}

// ---- buffer hand-over: "every reader of my buffer is done" ----------------------------------
// A rank whose symmetric buffer peers read must not overwrite it in its next call before they are
// done. Each reader adds one to the owner's `reads_done` counter after its last read (release);
// the owner waits until `readers` arrived and takes them off again (the counter is back where it
// was, so nothing is reset and an aborted call leaves no count the next call could mistake).
template <Coop C>
TL_DEVICE void reads_done_notify(C coop, const ll::Team& team, uint64_t* reads_done, int32_t owner) {
  coop.sync();
  if (!coop.leader()) return;
  detail::fence_before_remote_release<C>();
  ll::red_add<ll::Order::release, ll::Scope::sys>(ll::symm_at(team, reads_done, owner), 1);
}
template <Coop C>
TL_DEVICE void reads_done_wait(C coop, const ll::Team& team, uint64_t* reads_done, uint64_t readers) {
  if (coop.leader()) {
    ll::signal_wait_until<ll::Scope::sys>(team, reads_done, ll::Cmp::ge, readers, ll::WaitSite{-1, "reads_done"});
    ll::red_add<ll::Order::relaxed, ll::Scope::sys>(reads_done, uint64_t(0) - readers);
  }
  coop.sync();
}

// ---- counting signals -----------------------------------------------------------------------
// For producers whose number only the device knows (the tiles of a grouped GEMM over a routing
// built on the device): a local slot armed in stream order before the call's producers run,
// raised by one per finished producer, awaited until it reaches armed + expected. The call's epoch
// sits in the high half of the armed value, so a count an earlier (even aborted) call left behind
// never satisfies a later wait.
TL_DEVICE uint64_t count_base(const ll::Team& team) { return ll::call_epoch(team) << 32; }
// In stream order before every producer and consumer of the slot in this call.
template <Coop C>
TL_DEVICE void count_arm(C coop, const ll::Team& team, uint64_t* slot) {
  if (coop.leader()) ll::st_relaxed_gpu(slot, count_base(team));
}
// After the producer's writes (release, gpu scope: the consumer is on this GPU).
template <Coop C>
TL_DEVICE void count_notify(C coop, uint64_t* slot) {
  coop.sync();
  if (coop.leader()) ll::red_add_release_gpu(slot, 1);
}
template <Coop C>
TL_DEVICE void count_wait(C coop, const ll::Team& team, const uint64_t* slot, uint32_t expected, int32_t site_tile) {
  if (coop.leader())
    ll::signal_wait_until<ll::Scope::gpu>(team, slot, ll::Cmp::ge, count_base(team) + expected,
                                          ll::WaitSite{site_tile, "count_wait"});
  coop.sync();
}

#endif  // __CUDACC__

}  // namespace tilelink::tile
