// launch_ready_notify_nvshmem (nvshmem_launch.hpp).
#include "ops/common/nvshmem_launch.hpp"

#include "tilelink/tile/nvshmem.cuh"

namespace tilelink::ops {

namespace {
__global__ void ready_notify_nvshmem_kernel(const ll::Team team, uint64_t* ready) {
  for (int dst = 0; dst < team.num_ranks; ++dst)
    if (dst != team.rank) tile::rank_notify(tile::nvshmem, tile::Thread{}, team, ready, dst);
}
}  // namespace

cudaError_t launch_ready_notify_nvshmem(const ll::Team& team, uint64_t* ready, cudaStream_t stream) {
  ready_notify_nvshmem_kernel<<<1, 1, 0, stream>>>(team, ready);
  return cudaGetLastError();
}

}  // namespace tilelink::ops
