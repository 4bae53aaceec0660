// tilelink/tile/flagged.cuh — the low-latency data primitives of the tile layer: data travels as
// flagged words (ll/flagged.cuh), so a message needs no signal of its own.
//
//   put_flagged(coop, team, dst, src, g0, g1, flag, to)
//       granules [g0, g1) of `src` (8 bytes each) as flagged words into the symmetric buffer `dst`
//       (16 bytes per granule: granule g at dst + 2g) on rank `to`
//   get_flagged(coop, team, src, dst, g0, g1, flag, site)
//       waits for granules [g0, g1) of this rank's buffer `src` to carry `flag` and writes their
//       data to dst + g (any local memory); bounded, like every wait, and reported as `site`
//   pack_flagged(coop, packed, src, g0, g1, flag)
//       granules [g0, g1) of `src` as flagged words into this rank's `packed` (same layout as
//       put_flagged's `dst`), for a backend that sends them from memory (tile/nvshmem.cuh)
//
// The scope's threads take granules in turn, so its loads and stores are coalesced. No barrier:
// every granule carries its own flag.
#pragma once

#include <cstdint>

#include "tilelink/ll/flagged.cuh"
#include "tilelink/ll/identity.cuh"
#include "tilelink/tile/coop.cuh"

namespace tilelink::tile {

// What a timed-out wait reports as its place: a tile (or rank) number and a name.
using WaitSite = ll::WaitSite;

#if defined(__CUDACC__)

template <Coop C>
TL_DEVICE void pack_flagged(C coop, uint64_t* packed, const uint2* src, int64_t g0, int64_t g1, uint32_t flag) {
  for (int64_t g = g0 + coop.rank(); g < g1; g += coop.size()) ll::st_flagged2(packed + 2 * g, src[g], flag);
}

// By load/store: the packing itself, into the peer's buffer.
template <Coop C>
TL_DEVICE void put_flagged(C coop, const ll::Team& team, uint64_t* dst, const uint2* src, int64_t g0, int64_t g1,
                           uint32_t flag, int to) {
  pack_flagged(coop, ll::symm_at(team, dst, to), src, g0, g1, flag);
}

template <Coop C>
TL_DEVICE void get_flagged(C coop, const ll::Team& team, const uint64_t* src, uint2* dst, int64_t g0, int64_t g1,
                           uint32_t flag, WaitSite site) {
  for (int64_t g = g0 + coop.rank(); g < g1; g += coop.size())
    dst[g] = ll::ld_flagged2_wait(team, src + 2 * g, flag, site);
}

#endif  // __CUDACC__

}  // namespace tilelink::tile
