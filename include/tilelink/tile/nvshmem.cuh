// tilelink/tile/nvshmem.cuh — the tile primitives over the NVSHMEM backend (ll/nvshmem.cuh), for
// peers this rank cannot address by load/store. Same names and arguments as the load/store forms
// (data.cuh, signal.cuh), with the backend tag first:
//
//   tile_push_data(tile::nvshmem, coop, team, map, tile, dst, src, src_row0, row_bytes, signals, to)
//       the tile's rows of `src` (symmetric memory: NVSHMEM reads it, perhaps through a NIC) into
//       the same rows of the symmetric `dst` on rank `to`, and the tile's slot there raised to the
//       call's epoch after them: one put-with-signal.
//   tile_push_rows(tile::nvshmem, coop, team, dst, dst_ld, src, src_ld, rows, row_bytes, to)
//       `rows` rows of `row_bytes` from `src` (symmetric, rows dst_ld / src_ld bytes apart) into
//       the symmetric `dst` on rank `to`, a warp per row; published by a later peer_tile_notify.
//   peer_tile_notify(tile::nvshmem, coop, team, map, peer_signals, tile, dst)
//       after this rank's earlier pushes to `dst`, slot (tile, this rank) there raised to the
//       call's epoch.
//   rank_notify(tile::nvshmem, coop, team, rank_signals, dst)
//       coarse: this rank's slot of `rank_signals` on `dst` raised to the call's epoch.
//   put_flagged(tile::nvshmem, coop, team, dst, packed, g0, g1, to)
//       granules [g0, g1) of flagged words this rank packed (pack_flagged, flagged.cuh) in its
//       symmetric `packed` into the same granules of the symmetric `dst` on rank `to`: no signal,
//       each word carries its flag. The receiver polls them with get_flagged. NVSHMEM writes every
//       aligned 8-byte word whole (the low-latency protocol over a NIC relies on it, as NCCL's
//       does); `packed` may be rewritten after pushes_complete.
//   pushes_complete(tile::nvshmem, coop)
//       every push this rank issued has read its source and landed (their sources may change).
//
// tile::nvshmem names the same tag for the ops (which use no ll:: name). Waits need no backend: a
// consumer waits on its own slots (signal.cuh), wherever the producer is.
#pragma once

#include <cstdint>

#include "tilelink/ll/nvshmem.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/tile/coop.cuh"
#include "tilelink/tile/data.cuh"
#include "tilelink/tile/flagged.cuh"

namespace tilelink::tile {

inline constexpr ll::Nvshmem nvshmem{};

#if defined(__CUDACC__)

namespace detail {
template <Coop C>
constexpr ll::PutScope put_scope() {
  if constexpr (std::is_same_v<C, Block>) return ll::PutScope::block;
  else if constexpr (std::is_same_v<C, Warp>) return ll::PutScope::warp;
  else {
    static_assert(std::is_same_v<C, Thread>,
                  "NVSHMEM puts are issued by a Thread, a Warp or a whole Block (NVSHMEM has no other group)");
    return ll::PutScope::thread;
  }
}
}  // namespace detail

template <Coop C, class Mapping>
TL_DEVICE void tile_push_data(ll::Nvshmem, C coop, const ll::Team& team, const Mapping& map, int32_t tile, void* dst,
                              const void* src, int64_t src_row0, int64_t row_bytes, uint64_t* signals, int32_t to) {
  static_assert(RowTileMapping<Mapping>,
                "tile_push_data: Mapping must provide RowRange rows(tile) and notify_slot(tile)");
  const RowRange rr = map.rows(tile);
  ll::putmem_signal_nbi<detail::put_scope<C>()>(
      ll::nvshmem, team, static_cast<char*>(dst) + rr.begin * row_bytes,
      static_cast<const char*>(src) + (rr.begin - src_row0) * row_bytes, size_t(rr.count) * size_t(row_bytes),
      signals + map.notify_slot(tile), ll::call_epoch(team), to);
}

template <Coop C>
TL_DEVICE void tile_push_rows(ll::Nvshmem, C coop, const ll::Team& team, void* dst, int64_t dst_ld, const void* src,
                              int64_t src_ld, int32_t rows, int64_t row_bytes, int32_t to) {
  static_assert(!C::kOneThread, "tile_push_rows: moves one row per warp; call it with a Warp, WarpSpan or Block");
  const int32_t warp = int32_t(coop.rank() / 32), warps = int32_t(coop.size() / 32);
  for (int32_t r = warp; r < rows; r += warps)
    ll::putmem_nbi<ll::PutScope::warp>(ll::nvshmem, team, static_cast<char*>(dst) + r * dst_ld,
                                       static_cast<const char*>(src) + r * src_ld, size_t(row_bytes), to);
}

template <Coop C, class Mapping>
TL_DEVICE void peer_tile_notify(ll::Nvshmem, C coop, const ll::Team& team, const Mapping& map, uint64_t* peer_signals,
                                int32_t tile, int32_t dst) {
  static_assert(ProducerMapping<Mapping>, "peer_tile_notify: Mapping must provide notify_slot(tile)");
  coop.sync();
  if (!coop.leader()) return;
  uint64_t* slot = peer_signals + int64_t(map.notify_slot(tile)) * team.num_ranks + team.rank;
  ll::signal_set(ll::nvshmem, team, slot, ll::call_epoch(team), dst);
}

template <Coop C>
TL_DEVICE void rank_notify(ll::Nvshmem, C coop, const ll::Team& team, uint64_t* rank_signals, int32_t dst) {
  coop.sync();
  if (coop.leader()) ll::signal_set(ll::nvshmem, team, rank_signals + team.rank, ll::call_epoch(team), dst);
}

template <Coop C>
TL_DEVICE void put_flagged(ll::Nvshmem, C coop, const ll::Team& team, uint64_t* dst, const uint64_t* packed,
                           int64_t g0, int64_t g1, int32_t to) {
  if (g1 <= g0) return;
  // The scope's stores of `packed` (pack_flagged) are visible to the put's reads, by NVSHMEM's
  // threads or its NIC.
  __threadfence();
  coop.sync();
  ll::putmem_nbi<detail::put_scope<C>()>(ll::nvshmem, team, dst + 2 * g0, packed + 2 * g0,
                                         size_t(g1 - g0) * 2 * sizeof(uint64_t), to);
}

template <Coop C>
TL_DEVICE void pushes_complete(ll::Nvshmem, C coop) {
  coop.sync();
  if (coop.leader()) ll::quiet(ll::nvshmem);
}

#endif  // __CUDACC__

}  // namespace tilelink::tile
