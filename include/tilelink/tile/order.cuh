// tilelink/tile/order.cuh — tile orders ("swizzle"): which unit a rank visits at step i.
//
// Producer and consumer of one op pick their orders independently; the pair decides whether
// communication hides behind compute. Every order is a permutation of [0, n) per rank:
//   * Rotate{start}: start at unit `start` and wrap — "begin on local data" for AllGather-GEMM
//     (start = the unit holding this rank's rows), "begin on the rows the ring reduces first"
//     for GEMM-ReduceScatter.
//   * rank orders for the communication side: who a rank sends to / receives from at step s.
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::tile {

struct Identity {
  TL_HOST_DEVICE int32_t operator()(int32_t i, int32_t /*n*/) const { return i; }
};

struct Rotate {
  int32_t start = 0;
  TL_HOST_DEVICE int32_t operator()(int32_t i, int32_t n) const {
    int32_t u = i + start % n;
    return u >= n ? u - n : u;
  }
};

// Rank orders over a ring of `w` ranks seen from rank `r`, step s in [0, w).
// Step 0 is always the rank itself (local data first).
TL_HOST_DEVICE int32_t ring_next(int32_t r, int32_t s, int32_t w) { return (r + s) % w; }
TL_HOST_DEVICE int32_t ring_prev(int32_t r, int32_t s, int32_t w) { return ((r - s) % w + w) % w; }

// The M unit (cluster-M group of rows_per_unit rows) holding `row`.
TL_HOST_DEVICE int32_t unit_of_row(int32_t row, int32_t rows_per_unit) { return row / rows_per_unit; }

}  // namespace tilelink::tile
