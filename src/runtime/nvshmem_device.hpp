// The NVSHMEM device library, libtilelink_nvshmem_device: the kernels that reach peers through
// NVSHMEM's device API (put-with-signal), for peers that are not reachable by load/store.
//
// Those kernels call NVSHMEM device functions, so they are compiled with relocatable device code
// and device-linked against libnvshmem_device.a. They live in a shared library of their own so
// that this device link is done once, there: nothing else in tilelink (or in a program linking
// it) is built with relocatable device code, and a program that links NVSHMEM's device library
// itself keeps its own copy of NVSHMEM's device state apart from ours.
#pragma once

#include <cuda_runtime.h>

#include "tilelink/ll/team.cuh"

namespace tilelink::detail {

// Registers the library's NVSHMEM device state with NVSHMEM's host library, which must be
// initialised already; NVSHMEM then keeps it up to date. Idempotent. Returns NVSHMEM's status
// (0: done).
int nvshmem_device_attach();

// Carries this rank's abort slots (ll/signal.cuh) to the peers load/store cannot reach, in stream
// order: a timed-out wait raises the abort only where it can store (ll::detail::announce_abort),
// and the host relays it from there when it sees the failure. Returns the launch's status.
cudaError_t relay_abort_nvshmem(const ll::Team& team, cudaStream_t stream);

}  // namespace tilelink::detail
