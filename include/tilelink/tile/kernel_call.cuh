// tilelink/tile/kernel_call.cuh — an op call that is one kernel begins and ends its call on the
// device (the low-latency ops, where a second launch per call would be felt):
//
//   const ll::Team t = tile::begin_kernel_call(team);          // every thread, first
//   ... the call, with t (its waits compare with t.epoch) ...
//   tile::end_kernel_call(tile::Block{}, team, t.epoch, arrivals); // every thread, last
//
// `arrivals` is one zeroed signal slot of the op's own; the last block to finish publishes the
// call's epoch for the next call in stream order and sets `arrivals` back to zero (ll/kernel_call.cuh).
#pragma once

#include <cstdint>

#include "tilelink/ll/kernel_call.cuh"
#include "tilelink/tile/coop.cuh"

namespace tilelink::tile {

#if defined(__CUDACC__)

TL_DEVICE ll::Team begin_kernel_call(const ll::Team& team) { return ll::kernel_call_team(team); }

// The whole block, once, after its last access of the call.
TL_DEVICE void end_kernel_call(Block, const ll::Team& team, uint64_t epoch, uint64_t* arrivals) {
  ll::end_kernel_call_block(team, epoch, arrivals);
}

#endif  // __CUDACC__

}  // namespace tilelink::tile
