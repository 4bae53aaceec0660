// tilelink/ops/common/row_blocks.cuh — reduction units of GEMM-ReduceScatter / GEMM-AllReduce.
//
// The GEMM output [M, N] is cut two ways: the GEMM's tile grid (tile_m x tile_n, what the GEMM
// notifies) and the rank blocks (rank b owns rows [block_begin(b), block_begin(b + 1)), with
// block_begin(b) = floor(b * M / W): equal blocks when W divides M — reduce-scatter requires it —
// and blocks one row apart otherwise, some of them empty when M < W — the all-reduce allows it).
// A reduction *unit* is one GEMM tile intersected with one rank block: the smallest piece that
// has one producer tile and one owner. A tile that straddles a block boundary splits into a unit
// per block it touches, and everything below still holds.
//
// Units are named (block, m_blk, n_blk) and numbered (m_blk + block) * tiles_n + n_blk: blocks
// and m-blocks are both increasing row intervals, so for units of blocks b1 < b2 the m-blocks
// satisfy m1 <= m2 and m1 + b1 < m2 + b2 — slots never collide.
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"
#include "tilelink/tile/mapping.cuh"

namespace tilelink::ops {

struct Unit {
  int32_t block, m_blk, n_blk;
  int32_t row0, rows, col0, cols;
};

struct RowBlocks {
  tile::TileGridMapping grid;  // the GEMM's tiles
  int32_t m = 0, n = 0, world = 0;

  static TL_HOST_DEVICE RowBlocks make(int32_t m, int32_t n, int32_t tile_m, int32_t tile_n,
                                       int32_t world) {
    RowBlocks r;
    r.grid = tile::TileGridMapping::make(m, n, tile_m, tile_n, world);
    r.m = m;
    r.n = n;
    r.world = world;
    return r;
  }
  // Reduce-scatter's equal blocks (W divides M there): rows per rank.
  TL_HOST_DEVICE int32_t rows_per_rank() const { return grid.rows_per_rank; }
  TL_HOST_DEVICE int32_t block_begin(int32_t b) const { return int32_t(int64_t(b) * m / world); }
  TL_HOST_DEVICE int32_t block_rows(int32_t b) const { return block_begin(b + 1) - block_begin(b); }
  // The rows of the largest block (ceil(M / W)): what a slot that fits any block holds.
  TL_HOST_DEVICE int32_t max_block_rows() const { return (m + world - 1) / world; }
  TL_HOST_DEVICE int32_t first_m_blk(int32_t b) const { return block_begin(b) / grid.tile_m; }
  TL_HOST_DEVICE int32_t last_m_blk(int32_t b) const { return (block_begin(b + 1) - 1) / grid.tile_m; }
  // Units of block b: (last - first + 1) * tiles_n (none for an empty block), m-block-major.
  TL_HOST_DEVICE int32_t units_in_block(int32_t b) const {
    return block_rows(b) > 0 ? (last_m_blk(b) - first_m_blk(b) + 1) * grid.tiles_n : 0;
  }
  TL_HOST_DEVICE Unit unit(int32_t b, int32_t i) const {
    Unit u;
    u.block = b;
    u.m_blk = first_m_blk(b) + i / grid.tiles_n;
    u.n_blk = i % grid.tiles_n;
    const int32_t lo = block_begin(b), hi = block_begin(b + 1);
    const int32_t t0 = u.m_blk * grid.tile_m, t1 = t0 + grid.tile_m;
    u.row0 = t0 > lo ? t0 : lo;
    u.rows = (t1 < hi ? t1 : hi) - u.row0;
    u.col0 = u.n_blk * grid.tile_n;
    u.cols = (u.col0 + grid.tile_n < n ? u.col0 + grid.tile_n : n) - u.col0;
    return u;
  }
  TL_HOST_DEVICE int32_t unit_slot(const Unit& u) const {
    return (u.m_blk + u.block) * grid.tiles_n + u.n_blk;
  }
  TL_HOST_DEVICE int32_t num_units() const {
    int32_t n = 0;
    for (int32_t b = 0; b < world; ++b) n += units_in_block(b);
    return n;
  }
  TL_HOST_DEVICE int32_t num_unit_slots() const { return (grid.tiles_m + world) * grid.tiles_n; }
  TL_HOST_DEVICE int32_t gemm_tile(const Unit& u) const { return grid.tile(u.m_blk, u.n_blk); }
};

}  // namespace tilelink::ops
