// launch_allgather_ll_nvshmem (ops/common/nvshmem_launch.hpp): the allgather_ll kernel with each
// block's granules packed once as flagged words into this rank's own slot of the receive buffer
// (symmetric; no peer writes it) and put from there into the same slot on every peer. The put
// carries no signal: the receivers poll the flags, as over load/store. The last quiet lets the
// next call of the same parity repack the slot.
#include "ops/allgather_ll/allgather_ll_kernel.cuh"
#include "ops/common/nvshmem_launch.hpp"
#include "tilelink/tile/nvshmem.cuh"

namespace tilelink::ops {

namespace {

struct NvshmemSend {
  static TL_DEVICE void prepare(const ll::Team&, uint64_t* my_slot, const uint2* in, int64_t g0, int64_t g1,
                                uint32_t flag) {
    tile::pack_flagged(tile::Block{}, my_slot, in, g0, g1, flag);
  }
  static TL_DEVICE void send(const ll::Team& team, uint64_t* my_slot, const uint2*, int64_t g0, int64_t g1, uint32_t,
                             int to) {
    tile::put_flagged(tile::nvshmem, tile::Block{}, team, my_slot, my_slot, g0, g1, to);
  }
  static TL_DEVICE void finish() { tile::pushes_complete(tile::nvshmem, tile::Block{}); }
};

}  // namespace

cudaError_t launch_allgather_ll_nvshmem(const AllgatherLlParams& p, int blocks, cudaStream_t stream) {
  allgather_ll_kernel<NvshmemSend><<<blocks, kAllgatherLlThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace tilelink::ops
