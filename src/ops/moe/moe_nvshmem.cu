// launch_moe_rs_fused_nvshmem (ops/common/nvshmem_launch.hpp): moe_rs's reduction beside the
// grouped GEMM with each block's share for another rank written into this rank's symmetric send
// buffer and put from there into that rank's receive slot for this rank, with the block's signal
// (one put-with-signal per block and destination). The share for this rank itself is stored
// directly, as over load/store.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/common/nvshmem_launch.hpp"
#include "ops/moe/moe_rs_kernels.cuh"
#include "tilelink/tile/nvshmem.cuh"

namespace tilelink::ops {

namespace {

struct NvshmemShare {
  static TL_DEVICE float* slot(const MoeRsFusedParams& p, int32_t dst) {
    const int64_t mh = p.tokens_per_rank * p.sum.hidden;
    return dst == p.team.rank ? p.recv + int64_t(dst) * mh : p.send + int64_t(dst) * mh;
  }
  static TL_DEVICE void publish(const MoeRsFusedParams& p, const tile::SlotPerTile& blocks, float* slot, int64_t lo,
                                int64_t hi, int32_t dst) {
    const int32_t me = p.team.rank;
    // This rank's own heap is always reachable by load/store.
    if (dst == me) return LoadStoreShare::publish(p, blocks, slot, lo, hi, dst);
    const int64_t h = p.sum.hidden, mh = p.tokens_per_rank * h;
    // The block's stores of the share are visible to the put's reads (its threads, or a NIC).
    __threadfence();
    __syncthreads();
    float* remote_rows = p.recv + int64_t(me) * mh + lo * h;  // dst's slot for me: same address there
    tile::tile_push_rows(tile::nvshmem, tile::Block{}, p.team, remote_rows, h * 4, slot + lo * h, h * 4,
                         int32_t(hi - lo), h * 4, dst);
    tile::peer_tile_notify(tile::nvshmem, tile::Block{}, p.team, blocks, p.recv_slots, int32_t(blockIdx.x), dst);
  }
  // The next call rewrites the send buffer: every put must have read it.
  static TL_DEVICE void finish() { tile::pushes_complete(tile::nvshmem, tile::Block{}); }
};

}  // namespace

template <class T>
cudaError_t launch_moe_rs_fused_nvshmem(const MoeRsFusedParams& p, int blocks, cudaStream_t stream) {
  moe_rs_fused_kernel<T, NvshmemShare><<<blocks, kMoeRsThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template cudaError_t launch_moe_rs_fused_nvshmem<__nv_bfloat16>(const MoeRsFusedParams&, int, cudaStream_t);
template cudaError_t launch_moe_rs_fused_nvshmem<__half>(const MoeRsFusedParams&, int, cudaStream_t);

}  // namespace tilelink::ops
