// The ops' kernels over NVSHMEM put-with-signal that several ops share, for worlds whose peers
// are not all reachable by load/store. Built into libtilelink_nvshmem_device
// (src/runtime/nvshmem_device.hpp says why apart); the launchers return the launch's status.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::ops {

template <class T>
struct ReduceParams;         // tilelink/ops/common/reduce_kernels.cuh
struct AllgatherLlParams;    // ops/allgather_ll/allgather_ll_kernel.cuh
struct MoeRsFusedParams;     // ops/moe/moe_rs_kernels.cuh

// This rank's slot of `ready` on every peer raised to the call's epoch: "my buffers are free for
// this call's pushes". One thread.
cudaError_t launch_ready_notify_nvshmem(const ll::Team& team, uint64_t* ready, cudaStream_t stream);

// The full-mesh push reduce-scatter (full_mesh_reduce_kernel) with each unit put into its owner's
// stage slot by NVSHMEM (rows, then the slot's signal), ending with a quiet. T: __nv_bfloat16 or
// __half; p.algo full_mesh, p.mode push.
template <class T>
cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<T>& p, int blocks, cudaStream_t stream);

// Two-shot all-reduce with every byte pushed over NVSHMEM: the full-mesh push reduce-scatter into
// [W][ceil(M/W)][N] stage slots, then each owner's sum pushed into the [M][N] part of the stage
// after them on every peer. p.algo two_shot; the GEMM notifies locally.
template <class T>
cudaError_t launch_allreduce_push_nvshmem(const ReduceParams<T>& p, int blocks, cudaStream_t stream);

// The allgather_ll kernel with every peer's granules put over NVSHMEM (flagged words, no signal).
cudaError_t launch_allgather_ll_nvshmem(const AllgatherLlParams& p, int blocks, cudaStream_t stream);

// moe_rs's reduction beside the grouped GEMM, each block's share for another rank put from
// p.send into that rank's receive slot with the block's signal. T: __nv_bfloat16 or __half.
template <class T>
cudaError_t launch_moe_rs_fused_nvshmem(const MoeRsFusedParams& p, int blocks, cudaStream_t stream);

}  // namespace tilelink::ops
