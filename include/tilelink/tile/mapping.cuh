// tilelink/tile/mapping.cuh — from a tile id to the rank, the signal slots and the slice it names.
//
// High-level primitives take a tile id (or a row range) and a Mapping; the mapping supplies what
// the primitive needs to lower to signals and copies. Two kinds:
//   * static (affine) mappings — the formula is a compile-time type, its few parameters are
//     run-time scalars held by value, so it inlines to integer arithmetic;
//   * dynamic mappings — lookup tables in device memory (MoE routing, ragged shards).
// Which questions a mapping answers is checked with concepts, so using a mapping where it cannot
// serve fails to compile with a message that says which member is missing.
#pragma once

#include <concepts>
#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::tile {

// Half-open range of signal slots [begin, end).
struct SlotRange {
  int32_t begin = 0, end = 0;
  TL_HOST_DEVICE int32_t size() const { return end - begin; }
  TL_HOST_DEVICE bool empty() const { return end <= begin; }
};

// Half-open range of rows [begin, begin + count).
struct RowRange {
  int32_t begin = 0, count = 0;
  TL_HOST_DEVICE int32_t end() const { return begin + count; }
};

TL_HOST_DEVICE int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

// ---- concepts: what a primitive needs from its mapping ---------------------------------------

// Producers publish tile `t` in signal slot notify_slot(t); the consumer of tile t sits on owner(t).
template <class M>
concept ProducerMapping = requires(const M& m, int32_t t) {
  { m.notify_slot(t) } -> std::convertible_to<int32_t>;
  { m.owner(t) } -> std::convertible_to<int32_t>;
};

// A consumer tile (or region) depends on the contiguous slots wait_slots(region).
template <class M, class Region>
concept ConsumerMapping = requires(const M& m, Region r) {
  { m.wait_slots(r) } -> std::same_as<SlotRange>;
};

// ---- static mappings ------------------------------------------------------------------------

// Rows of a tensor gathered from every rank (AllGather), moved in chunks of rows.
// Rank r owns rows [r*rows_per_rank, (r+1)*rows_per_rank); its chunk c covers
// r*rows_per_rank + [c*chunk_rows, min((c+1)*chunk_rows, rows_per_rank)). Tiles (chunks) are
// numbered globally in row order, tile = r*chunks_per_rank + c, and tile t is published in slot
// t. So any contiguous row range a consumer reads depends on a contiguous slot range.
struct RowChunkMapping {
  int32_t rows_per_rank = 0;
  int32_t chunk_rows = 0;
  int32_t chunks_per_rank = 0;
  int32_t num_ranks = 0;

  static TL_HOST_DEVICE RowChunkMapping make(int32_t rows_per_rank, int32_t chunk_rows,
                                             int32_t num_ranks) {
    RowChunkMapping m;
    m.rows_per_rank = rows_per_rank;
    m.chunk_rows = chunk_rows < rows_per_rank ? chunk_rows : rows_per_rank;
    m.chunks_per_rank = ceil_div(rows_per_rank, m.chunk_rows);
    m.num_ranks = num_ranks;
    return m;
  }
  TL_HOST_DEVICE int32_t num_tiles() const { return chunks_per_rank * num_ranks; }
  TL_HOST_DEVICE int32_t tile(int32_t rank, int32_t chunk) const { return rank * chunks_per_rank + chunk; }
  TL_HOST_DEVICE int32_t owner(int32_t t) const { return t / chunks_per_rank; }
  TL_HOST_DEVICE int32_t notify_slot(int32_t t) const { return t; }
  TL_HOST_DEVICE RowRange rows(int32_t t) const {
    int32_t r = t / chunks_per_rank, c = t % chunks_per_rank;
    int32_t first = c * chunk_rows;
    int32_t last = first + chunk_rows < rows_per_rank ? first + chunk_rows : rows_per_rank;
    return {r * rows_per_rank + first, last - first};
  }
  // Chunk containing global row `row`.
  TL_HOST_DEVICE int32_t tile_of_row(int32_t row) const {
    int32_t r = row / rows_per_rank;
    return r * chunks_per_rank + (row - r * rows_per_rank) / chunk_rows;
  }
  // Slots a consumer reading rows [rows.begin, rows.end()) waits on.
  TL_HOST_DEVICE SlotRange wait_slots(RowRange rr) const {
    if (rr.count <= 0) return {0, 0};
    return {tile_of_row(rr.begin), tile_of_row(rr.end() - 1) + 1};
  }
};

// Output tiles of a GEMM (tile_m x tile_n grid over M x N) whose rows are split evenly across
// ranks (ReduceScatter: rank r owns rows [r*rows_per_rank, (r+1)*rows_per_rank)). Tile id =
// m_blk*tiles_n + n_blk, published in the slot of the same number. A consumer that needs a band of
// rows depends on every column tile of the m-blocks overlapping it: a contiguous slot range.
struct TileGridMapping {
  int32_t tile_m = 0, tile_n = 0;
  int32_t tiles_m = 0, tiles_n = 0;
  int32_t rows_per_rank = 0;

  static TL_HOST_DEVICE TileGridMapping make(int32_t m, int32_t n, int32_t tile_m, int32_t tile_n,
                                             int32_t num_ranks) {
    TileGridMapping g;
    g.tile_m = tile_m;
    g.tile_n = tile_n;
    g.tiles_m = ceil_div(m, tile_m);
    g.tiles_n = ceil_div(n, tile_n);
    g.rows_per_rank = m / num_ranks;
    return g;
  }
  TL_HOST_DEVICE int32_t num_tiles() const { return tiles_m * tiles_n; }
  TL_HOST_DEVICE int32_t tile(int32_t m_blk, int32_t n_blk) const { return m_blk * tiles_n + n_blk; }
  TL_HOST_DEVICE int32_t notify_slot(int32_t t) const { return t; }
  // Rank owning the tile's first row (tiles never straddle ranks when rows_per_rank % tile_m == 0).
  TL_HOST_DEVICE int32_t owner(int32_t t) const { return (t / tiles_n) * tile_m / rows_per_rank; }
  TL_HOST_DEVICE SlotRange wait_slots(RowRange rr) const {
    if (rr.count <= 0) return {0, 0};
    return {(rr.begin / tile_m) * tiles_n, ((rr.end() - 1) / tile_m + 1) * tiles_n};
  }
  TL_HOST_DEVICE SlotRange wait_slots(int32_t t) const { return {t, t + 1}; }
};

// The problems of a grouped GEMM fed chunk by chunk: groups [c*groups_per_chunk,
// (c+1)*groups_per_chunk) read only rows of chunk c, which `producers_per_chunk` producers fill,
// each publishing its own slot (tile id = chunk * producers_per_chunk + producer). A tile of group
// g depends on its chunk's producers' slots.
struct GroupChunkMapping {
  int32_t groups_per_chunk = 1;
  int32_t producers_per_chunk = 1;
  int32_t chunks = 0;

  TL_HOST_DEVICE int32_t num_tiles() const { return chunks * producers_per_chunk; }
  TL_HOST_DEVICE int32_t tile(int32_t chunk, int32_t producer) const {
    return chunk * producers_per_chunk + producer;
  }
  TL_HOST_DEVICE int32_t notify_slot(int32_t t) const { return t; }
  TL_HOST_DEVICE int32_t owner(int32_t) const { return 0; }  // consumed where produced
  TL_HOST_DEVICE int32_t chunk_of_group(int32_t g) const { return g / groups_per_chunk; }
  TL_HOST_DEVICE SlotRange wait_slots(int32_t group) const {
    const int32_t c = chunk_of_group(group);
    return {c * producers_per_chunk, (c + 1) * producers_per_chunk};
  }
};

// Tiles that are their own slots: work split into `tiles` parts (e.g. a block's share of rows),
// each published once per call; the consumer sits wherever the producer sends it.
struct SlotPerTile {
  int32_t tiles = 0;
  int32_t consumer = 0;  // the rank every tile is consumed on (Notify::owner sends it there)
  TL_HOST_DEVICE int32_t num_tiles() const { return tiles; }
  TL_HOST_DEVICE int32_t notify_slot(int32_t t) const { return t; }
  TL_HOST_DEVICE int32_t owner(int32_t) const { return consumer; }
  TL_HOST_DEVICE SlotRange wait_slots(int32_t t) const { return {t, t + 1}; }
};

// ---- dynamic mapping ------------------------------------------------------------------------

// Lookup tables in device memory: tile t is consumed on owner[t], published in slot[t], and
// depends on the slots [dep_begin[t], dep_end[t]). Built on the host or by a routing kernel.
struct TableMapping {
  const int32_t* owner_of = nullptr;
  const int32_t* slot_of = nullptr;
  const int32_t* dep_begin = nullptr;
  const int32_t* dep_end = nullptr;
  int32_t tiles = 0;

  TL_HOST_DEVICE int32_t num_tiles() const { return tiles; }
  TL_HOST_DEVICE int32_t owner(int32_t t) const { return owner_of[t]; }
  TL_HOST_DEVICE int32_t notify_slot(int32_t t) const { return slot_of[t]; }
  TL_HOST_DEVICE SlotRange wait_slots(int32_t t) const { return {dep_begin[t], dep_end[t]}; }
};

static_assert(ProducerMapping<RowChunkMapping> && ConsumerMapping<RowChunkMapping, RowRange>);
static_assert(ProducerMapping<TileGridMapping> && ConsumerMapping<TileGridMapping, int32_t>);
static_assert(ProducerMapping<TableMapping> && ConsumerMapping<TableMapping, int32_t>);
static_assert(ProducerMapping<GroupChunkMapping> && ConsumerMapping<GroupChunkMapping, int32_t>);
static_assert(ProducerMapping<SlotPerTile> && ConsumerMapping<SlotPerTile, int32_t>);

}  // namespace tilelink::tile
