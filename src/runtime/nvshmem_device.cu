// The runtime's part of libtilelink_nvshmem_device (nvshmem_device.hpp): NVSHMEM's device state,
// and the world's abort carried to the peers that load/store cannot reach.
#include <nvshmem.h>
#include <nvshmemx.h>

#include "nvshmem_device.hpp"
#include "tilelink/ll/nvshmem.cuh"

namespace tilelink::detail {

namespace {

// This rank's abort slots (ll/signal.cuh: the latest aborted epoch, then who raised it) copied to
// every peer that announce_abort skipped. The epoch goes in by compare-and-swap, raising it only
// (NVSHMEM has no atomic max): relays of several ranks may cross.
__global__ void relay_abort_kernel(const ll::Team team) {
  volatile uint64_t* mine = team.abort_slots;
  const uint64_t epoch = mine[0], who = mine[1];
  if (epoch == 0) return;
  for (int peer = 0; peer < team.num_ranks; ++peer) {
    if (ll::load_store_reachable(team, peer)) continue;
    nvshmem_uint64_atomic_set(team.abort_slots + 1, who, peer);
    nvshmem_fence();
    uint64_t seen = nvshmem_uint64_atomic_fetch(team.abort_slots, peer);
    while (seen < epoch) {
      const uint64_t before = nvshmem_uint64_atomic_compare_swap(team.abort_slots, seen, epoch, peer);
      if (before == seen) break;
      seen = before;
    }
  }
  nvshmem_quiet();
}

}  // namespace

int nvshmem_device_attach() { return ll::attach_nvshmem_device_state(); }

cudaError_t relay_abort_nvshmem(const ll::Team& team, cudaStream_t stream) {
  relay_abort_kernel<<<1, 1, 0, stream>>>(team);
  return cudaGetLastError();
}

}  // namespace tilelink::detail
