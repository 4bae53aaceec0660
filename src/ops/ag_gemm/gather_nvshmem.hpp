// AllGather-GEMM's gather over NVSHMEM put-with-signal, for worlds whose peers are not all
// reachable by load/store (another node, or one node per process). Part of
// libtilelink_nvshmem_device (runtime/nvshmem_device.hpp says why apart). The launchers return
// the launch's status; the caller checks it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::ops {

struct AgGatherParams;  // tilelink/ops/ag_gemm/gather_kernel.cuh

// Push mode: `blocks` blocks put this rank's rows, chunk by chunk in ring order, into every
// peer's gathered A, each chunk with its slot; a peer's chunks go once it said it is ready. The
// rows are read from this rank's own rows of the symmetric gathered A (p.gathered; p.a_local is
// not used), which NVSHMEM can hand to a NIC.
cudaError_t launch_ag_gather_nvshmem(const AgGatherParams& p, int blocks, cudaStream_t stream);

}  // namespace tilelink::ops
