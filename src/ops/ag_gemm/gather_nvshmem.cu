// AllGather-GEMM's gather over NVSHMEM put-with-signal (gather_nvshmem.hpp).
#include "ops/ag_gemm/gather_nvshmem.hpp"

#include "tilelink/ops/ag_gemm/gather_kernel.cuh"
#include "tilelink/tile/nvshmem.cuh"

namespace tilelink::ops {

namespace {

// The push loop of ag_gather_kernel with the put in NVSHMEM's hands. A chunk's slot on the peer
// has one writer (this rank), and this rank pushes into a peer's call only after that peer said
// it is ready for it, so setting the slot to the epoch never lowers a later call's value.
__global__ void __launch_bounds__(kGatherThreads) ag_gather_nvshmem_kernel(const AgGatherParams p) {
  const int world = p.team.num_ranks, me = p.team.rank, chunks = p.map.chunks_per_rank;
  for (int item = blockIdx.x; item < (world - 1) * chunks; item += gridDim.x) {
    const int step = 1 + item / chunks, chunk = item % chunks;
    const int to = tile::ring_prev(me, step, world);
    tile::rank_wait(tile::Block{}, p.team, p.ready, to);
    tile::tile_push_data(tile::nvshmem, tile::Block{}, p.team, p.map, p.map.tile(me, chunk), p.gathered, p.gathered,
                         0, p.row_bytes, p.chunk_signals, to);
  }
  // The next call overwrites these rows: every push must have read them before the kernel ends.
  tile::pushes_complete(tile::nvshmem, tile::Block{});
}

}  // namespace

cudaError_t launch_ag_gather_nvshmem(const AgGatherParams& p, int blocks, cudaStream_t stream) {
  ag_gather_nvshmem_kernel<<<blocks, kGatherThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace tilelink::ops
