// tilelink/gemm/hooks.cuh — the contract between the GEMM engine and a fused op.
//
// The engine is a persistent, warp-specialized Hopper GEMM (CUTLASS collectives). A fused op
// steers it through a Hooks object, passed by value inside the kernel's params, at three points:
//
//   order_m(unit, num_units, rows_per_unit)
//                              tile scheduler: which M unit the scheduler's unit-th M step visits.
//                              A unit is one cluster's worth of CTA tiles along M
//                              (rows_per_unit = tile_m * cluster_m); the result must be a
//                              permutation of [0, num_units). Lets each rank start on its local
//                              shard (AllGather-GEMM) or on the rows its ring neighbour reduces
//                              first (GEMM-ReduceScatter).
//   before_load(tile)          mainloop producer warp, every lane, before the first TMA load of
//                              the tile's operands — also for a cluster's spare CTA whose tile is
//                              empty in one dimension (it still loads the operand it multicasts
//                              to its partner; rows or cols is then 0). On return the tile's rows of A (and columns
//                              of B) may be read by the TMA unit: an implementation waits on one
//                              lane with acquire semantics, then fence.proxy.async, then __syncwarp.
//   after_store(tile)          exactly one thread, after the tile's output is complete in global
//                              memory (TMA stores waited on, proxy-fenced): publish it (release).
//
// Hooks with kWaitsBeforeLoad / kNotifiesAfterStore false cost nothing: the engine skips them at
// compile time, so a GEMM with NoHooks is the plain GEMM.
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::gemm {

// One output tile as the engine sees it. Rows/cols are clipped to the problem (ragged edges).
// The grouped engine (grouped.hpp) numbers tiles within their group: rows are the group's own
// rows (row 0 = the group's first row); the dense engine has one group, group 0.
struct TileCoord {
  int32_t m_blk, n_blk;  // CTA-tile indices
  int32_t row0, rows;    // rows of A / D covered: [row0, row0 + rows)
  int32_t col0, cols;    // columns of D (rows of B) covered
  int32_t group = 0;     // the problem of a grouped GEMM the tile belongs to
};

struct NoHooks {
  static constexpr bool kWaitsBeforeLoad = false;
  static constexpr bool kNotifiesAfterStore = false;
  static constexpr bool kReordersM = false;
  TL_DEVICE int order_m(int unit, int /*num_units*/, int /*rows_per_unit*/) const { return unit; }
  TL_DEVICE void before_load(const TileCoord&) const {}
  TL_DEVICE void after_store(const TileCoord&) const {}
};

}  // namespace tilelink::gemm
