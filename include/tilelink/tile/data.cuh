// tilelink/tile/data.cuh — the SM data primitives of the tile layer. Each takes its cooperation
// scope first (coop.cuh); the bytes are split over the scope's threads.
//
//   tile_push_data(coop, team, map, tile, dst, src, src_row0, row_bytes, signals, to)
//       copy the tile's rows from this rank's `src` into the same rows of the symmetric tensor
//       `dst` on rank `to`, then release the tile's slot there (one signal, after the data).
//   tile_pull_data(coop, team, map, tile, dst, src, row_bytes, signals, from)
//       copy the tile's rows of the symmetric tensor `src` on rank `from` into the same rows of
//       `dst` here, then release the tile's slot here.
//
//   peer_view(team, local, peer)
//       where the symmetric tensor `local` lives on rank `peer`, for a scope that computes what it
//       stores there (weak stores; publish with peer_tile_notify).
//   tile_gather_rows(coop, team, dst, src, row_bytes, begin, end, index, from)
//       row i of `dst` here, for i in [begin, end), is row index(i) of the symmetric tensor `src`
//       on rank `from` (a gather by index: tokens into expert order), one warp per row; the
//       caller publishes.
//
// The mapping names the rows (map.rows(tile)) and the slot (map.notify_slot(tile)). Push needs a
// single synchronisation (the data and its flag travel together); pull lets the consumer choose
// the order it fetches in, at the price of knowing first that the source is ready (rank_wait).
#pragma once

#include <cstdint>

#include "tilelink/ll/data.cuh"
#include "tilelink/tile/coop.cuh"
#include "tilelink/tile/mapping.cuh"
#include "tilelink/tile/signal.cuh"

namespace tilelink::tile {

// Mappings whose tiles are bands of rows of a row-major tensor.
template <class M>
concept RowTileMapping = ProducerMapping<M> && requires(const M& m, int32_t t) {
  { m.rows(t) } -> std::same_as<RowRange>;
};

#if defined(__CUDACC__)

namespace detail {

// Weak copy of `bytes` split over the scope, then the scope's barrier: afterwards the leader's
// release covers every member's part.
template <Coop C>
TL_DEVICE void copy_then_sync(C coop, void* dst, const void* src, size_t bytes) {
  ll::detail::copy_bytes(dst, src, bytes, coop.rank(), coop.size());
  coop.sync();
}

}  // namespace detail

template <Coop C, class Mapping>
TL_DEVICE void tile_push_data(C coop, const ll::Team& team, const Mapping& map, int32_t tile, void* dst,
                              const void* src, int64_t src_row0, int64_t row_bytes, uint64_t* signals, int32_t to) {
  static_assert(RowTileMapping<Mapping>,
                "tile_push_data: Mapping must provide RowRange rows(tile) and notify_slot(tile)");
  const RowRange rr = map.rows(tile);
  detail::copy_then_sync(coop, ll::symm_at(team, static_cast<char*>(dst) + rr.begin * row_bytes, to),
                         static_cast<const char*>(src) + (rr.begin - src_row0) * row_bytes,
                         size_t(rr.count) * size_t(row_bytes));
  if (coop.leader())
    ll::signal_op<ll::Scope::sys>(team, signals + map.notify_slot(tile), ll::call_epoch(team), ll::SignalOp::max, to);
}

template <Coop C, class Mapping>
TL_DEVICE void tile_pull_data(C coop, const ll::Team& team, const Mapping& map, int32_t tile, void* dst,
                              const void* src, int64_t row_bytes, uint64_t* signals, int32_t from) {
  static_assert(RowTileMapping<Mapping>,
                "tile_pull_data: Mapping must provide RowRange rows(tile) and notify_slot(tile)");
  const RowRange rr = map.rows(tile);
  const int64_t offset = rr.begin * row_bytes;
  detail::copy_then_sync(coop, static_cast<char*>(dst) + offset,
                         ll::symm_at(team, static_cast<const char*>(src) + offset, from),
                         size_t(rr.count) * size_t(row_bytes));
  if (coop.leader()) ll::red_max_release_gpu(signals + map.notify_slot(tile), ll::call_epoch(team));
}

template <class T>
TL_DEVICE T* peer_view(const ll::Team& team, T* local, int32_t peer) {
  return ll::symm_at(team, local, peer);
}

// One warp per row; the scope's warps split [begin, end). Returns after every row is in place
// (the scope's barrier), so the leader may publish them with producer_tile_notify.
template <Coop C, class RowIndex>
TL_DEVICE void tile_gather_rows(C coop, const ll::Team& team, void* dst, const void* src, int64_t row_bytes,
                                int32_t begin, int32_t end, RowIndex index, int32_t from) {
  static_assert(!C::kOneThread, "tile_gather_rows: moves one row per warp; call it with a Warp, WarpSpan or Block");
  const int32_t warp = int32_t(coop.rank() / 32), warps = int32_t(coop.size() / 32);
  for (int32_t i = begin + warp; i < end; i += warps) {
    const int64_t row = index(i);
    ll::getmem_nbi_warp(team, static_cast<char*>(dst) + int64_t(i) * row_bytes,
                        static_cast<const char*>(src) + row * row_bytes, size_t(row_bytes), from);
  }
  coop.sync();
}

#endif  // __CUDACC__

}  // namespace tilelink::tile
