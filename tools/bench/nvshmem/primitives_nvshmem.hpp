// The NVSHMEM backend's part of `tilelink-bench primitives`: its kernels call NVSHMEM's device
// API, so they are built with relocatable device code and device-linked into tilelink-bench
// against NVSHMEM's device library (tools/CMakeLists.txt), apart from the other bench kernels.
// tilelink-bench then holds its own copy of NVSHMEM's device state, beside the library's
// (libtilelink_nvshmem_device.so) — as any program with NVSHMEM kernels of its own does.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::bench::nvshmem {

// Registers this module's NVSHMEM device state with NVSHMEM (initialised by the world's transport).
// Returns NVSHMEM's status (0: done).
int attach();

// Rank 0 and 1 ping-pong `slot` with NVSHMEM signals (set to base + k for the k-th message), each
// waiting on its own slot with the bounded wait; rank 0 stamps globaltimer every `rounds` round
// trips into stamps[0..samples]. One thread per rank.
cudaError_t ping_pong(const ll::Team& team, uint64_t* slot, uint64_t base, uint32_t rounds, uint32_t samples,
                      uint64_t* stamps, cudaStream_t stream);

// `blocks` blocks put [0, bytes) of the symmetric `src` into the symmetric `dst` on `peer`, a
// slice each (NVSHMEM put-with-signal; `sig` on the peer set to `value` after each slice), then
// quiet.
cudaError_t put(const ll::Team& team, int blocks, char* dst, const char* src, size_t bytes, uint64_t* sig,
                uint64_t value, int peer, cudaStream_t stream);

}  // namespace tilelink::bench::nvshmem
