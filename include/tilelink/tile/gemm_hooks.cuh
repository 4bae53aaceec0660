// tilelink/tile/gemm_hooks.cuh — the tile primitives, bound to the GEMM engine's hook points.
//
// The GEMM engine (gemm/hooks.cuh) calls order_m / before_load / after_store; these adapters
// implement them with the tile layer, so a fused op's GEMM side is one of two small structs:
//   GatherWaitHooks  — consumer of an AllGather: wait for the chunks of A a tile reads,
//                      visit this rank's rows first.
//   TileNotifyHooks  — producer for a reduction: publish every stored output tile, visit the rows
//                      the reduction needs first.
//   GroupWaitHooks   — grouped GEMM consumer of a gather: a tile waits for the producers of the
//                      chunk its group reads (GroupChunkMapping).
//   GroupCountHooks  — grouped GEMM producer for a reduction: every stored tile counts itself done
//                      in its chunk's counting signal (count_notify).
#pragma once

#include <cstdint>

#include "tilelink/gemm/hooks.cuh"
#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/team.cuh"
#include "tilelink/tile/mapping.cuh"
#include "tilelink/tile/order.cuh"
#include "tilelink/tile/signal.cuh"

namespace tilelink::tile {

#if defined(__CUDACC__)
// consumer_tile_wait for a GEMM's producer warp (every lane calls it): one lane acquires the local
// slots with the lean spin (the warp runs on 40 registers), then every lane orders its later TMA
// (async proxy) reads after that acquire.
template <class Mapping, class Region>
TL_DEVICE void producer_warp_wait(const ll::Team& team, const Mapping& map, const uint64_t* signals, Region region) {
  consumer_tile_wait<Spin::lean>(Warp{}, team, map, signals, region);
  ll::fence_proxy_async_global();
}
#endif

struct GatherWaitHooks {
  static constexpr bool kWaitsBeforeLoad = true;
  static constexpr bool kNotifiesAfterStore = false;
  static constexpr bool kReordersM = true;

  ll::Team team;
  RowChunkMapping map;
  const uint64_t* signals;  // one slot per chunk of the gathered A; nullptr: nothing to wait for
  int32_t first_row;        // the row this rank visits first (its own shard)

#if defined(__CUDACC__)
  TL_DEVICE int order_m(int unit, int num_units, int rows_per_unit) const {
    return Rotate{unit_of_row(first_row, rows_per_unit)}(unit, num_units);
  }
  // Producer warp, every lane: the chunks the tile's rows come from.
  TL_DEVICE void before_load(const gemm::TileCoord& c) const {
    if (signals != nullptr) producer_warp_wait(team, map, signals, RowRange{c.row0, c.rows});
  }
  TL_DEVICE void after_store(const gemm::TileCoord&) const {}
#endif
};

struct TileNotifyHooks {
  static constexpr bool kWaitsBeforeLoad = false;
  static constexpr bool kNotifiesAfterStore = true;
  static constexpr bool kReordersM = true;

  ll::Team team;
  TileGridMapping grid;  // the GEMM's own tile grid (tile_m x tile_n of the chosen config)
  uint64_t* signals;     // local: one slot per output tile; owner/all_ranks: (tile, rank) slots
  Notify mode;           // local (ring / push reductions), owner (pull by the owner), all_ranks
  int32_t first_row;     // the row this rank visits first

#if defined(__CUDACC__)
  TL_DEVICE int order_m(int unit, int num_units, int rows_per_unit) const {
    return Rotate{unit_of_row(first_row, rows_per_unit)}(unit, num_units);
  }
  TL_DEVICE void before_load(const gemm::TileCoord&) const {}
  // One thread, after the tile's stores completed and were proxy-fenced (engine contract).
  // local: slot t on this rank. owner / all_ranks: slot (t, this rank) on every rank that owns
  // rows of the tile / on every rank, so a consumer can tell its sources apart.
  TL_DEVICE void after_store(const gemm::TileCoord& c) const {
    const int32_t t = grid.tile(c.m_blk, c.n_blk);
    if (mode == Notify::local) {
      producer_tile_notify<Notify::local>(Thread{}, team, grid, signals, t);
      return;
    }
    ll::fence_acq_rel_sys();
    int32_t first = 0, last = team.num_ranks - 1;
    if (mode == Notify::owner) {
      first = c.row0 / grid.rows_per_rank;
      last = (c.row0 + c.rows - 1) / grid.rows_per_rank;
    }
    for (int32_t r = first; r <= last; ++r) peer_tile_notify(Thread{}, team, grid, signals, t, r);
  }
#endif
};

struct GroupWaitHooks {
  static constexpr bool kWaitsBeforeLoad = true;
  static constexpr bool kNotifiesAfterStore = false;
  static constexpr bool kReordersM = false;

  ll::Team team;
  GroupChunkMapping map;
  const uint64_t* signals;  // local, map.num_tiles() slots; nullptr: nothing to wait for

#if defined(__CUDACC__)
  TL_DEVICE int order_m(int unit, int, int) const { return unit; }
  TL_DEVICE void before_load(const gemm::TileCoord& c) const {
    if (signals != nullptr) producer_warp_wait(team, map, signals, c.group);
  }
  TL_DEVICE void after_store(const gemm::TileCoord&) const {}
#endif
};

struct GroupCountHooks {
  static constexpr bool kWaitsBeforeLoad = false;
  static constexpr bool kNotifiesAfterStore = true;
  static constexpr bool kReordersM = false;

  uint64_t* counters;        // local, one counting signal per chunk (armed for this call)
  int32_t groups_per_chunk;  // groups [c * groups_per_chunk, (c + 1) * groups_per_chunk) form chunk c

#if defined(__CUDACC__)
  TL_DEVICE int order_m(int unit, int, int) const { return unit; }
  TL_DEVICE void before_load(const gemm::TileCoord&) const {}
  TL_DEVICE void after_store(const gemm::TileCoord& c) const {
    count_notify(Thread{}, counters + c.group / groups_per_chunk);
  }
#endif
};

}  // namespace tilelink::tile
