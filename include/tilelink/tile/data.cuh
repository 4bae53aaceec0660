// tilelink/tile/data.cuh — the SM data primitives of the tile layer (whole block calls).
//
//   tile_push_data_block(team, map, tile, dst, src, src_row0, row_bytes, signals, to)
//       copy the tile's rows from this rank's `src` into the same rows of the symmetric tensor
//       `dst` on rank `to`, then release the tile's slot there (one signal, after the data).
//   tile_pull_data_block(team, map, tile, dst, src, row_bytes, signals, from)
//       copy the tile's rows of the symmetric tensor `src` on rank `from` into the same rows of
//       `dst` here, then release the tile's slot here.
//
//   peer_view(team, local, peer)
//       where the symmetric tensor `local` lives on rank `peer`, for a block that computes what it
//       stores there (weak stores; publish with peer_tile_notify_block).
//   tile_gather_rows_block(team, dst, src, row_bytes, begin, end, index, from)
//       row i of `dst` here, for i in [begin, end), is row index(i) of the symmetric tensor `src`
//       on rank `from` (a gather by index: tokens into expert order); the caller publishes.
//
// The mapping names the rows (map.rows(tile)) and the slot (map.notify_slot(tile)). Push needs a
// single synchronisation (the data and its flag travel together); pull lets the consumer choose
// the order it fetches in, at the price of knowing first that the source is ready (rank_wait).
#pragma once

#include <cstdint>

#include "tilelink/ll/data.cuh"
#include "tilelink/tile/mapping.cuh"
#include "tilelink/tile/signal.cuh"

namespace tilelink::tile {

// Mappings whose tiles are bands of rows of a row-major tensor.
template <class M>
concept RowTileMapping = ProducerMapping<M> && requires(const M& m, int32_t t) {
  { m.rows(t) } -> std::same_as<RowRange>;
};

#if defined(__CUDACC__)

template <class Mapping>
TL_DEVICE void tile_push_data_block(const ll::Team& team, const Mapping& map, int32_t tile,
                                    void* dst, const void* src, int64_t src_row0,
                                    int64_t row_bytes, uint64_t* signals, int32_t to) {
  static_assert(RowTileMapping<Mapping>,
                "tile_push_data_block: Mapping must provide RowRange rows(tile) and notify_slot(tile)");
  const RowRange rr = map.rows(tile);
  ll::putmem_signal_block(team, static_cast<char*>(dst) + rr.begin * row_bytes,
                          static_cast<const char*>(src) + (rr.begin - src_row0) * row_bytes,
                          size_t(rr.count) * size_t(row_bytes), signals + map.notify_slot(tile),
                          ll::call_epoch(team), ll::SignalOp::max, to);
}

template <class Mapping>
TL_DEVICE void tile_pull_data_block(const ll::Team& team, const Mapping& map, int32_t tile,
                                    void* dst, const void* src, int64_t row_bytes,
                                    uint64_t* signals, int32_t from) {
  static_assert(RowTileMapping<Mapping>,
                "tile_pull_data_block: Mapping must provide RowRange rows(tile) and notify_slot(tile)");
  const RowRange rr = map.rows(tile);
  const int64_t offset = rr.begin * row_bytes;
  ll::getmem_block(team, static_cast<char*>(dst) + offset, static_cast<const char*>(src) + offset,
                   size_t(rr.count) * size_t(row_bytes), from);
  if (threadIdx.x == 0) producer_tile_notify<Notify::local>(team, map, signals, tile);
}

template <class T>
TL_DEVICE T* peer_view(const ll::Team& team, T* local, int32_t peer) {
  return ll::symm_at(team, local, peer);
}

// One warp per row; the block's warps split [begin, end). Returns after every row is in place
// (block barrier), so one thread may publish them with producer_tile_notify_block.
template <class RowIndex>
TL_DEVICE void tile_gather_rows_block(const ll::Team& team, void* dst, const void* src, int64_t row_bytes,
                                      int32_t begin, int32_t end, RowIndex index, int32_t from) {
  const int32_t warp = int32_t(threadIdx.x / 32), warps = int32_t(blockDim.x / 32);
  for (int32_t i = begin + warp; i < end; i += warps) {
    const int64_t row = index(i);
    ll::getmem_nbi_warp(team, static_cast<char*>(dst) + int64_t(i) * row_bytes,
                        static_cast<const char*>(src) + row * row_bytes, size_t(row_bytes), from);
  }
  __syncthreads();
}

#endif  // __CUDACC__

}  // namespace tilelink::tile
