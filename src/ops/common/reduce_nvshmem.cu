// launch_full_mesh_push_nvshmem (nvshmem_launch.hpp): the full-mesh push reduce-scatter with its
// pushes over NVSHMEM put-with-signal. A unit's rows go to their owner's stage slot for this rank
// (one warp per row), then the slot's signal, after a fence; the owner waits on its own slots as
// over load/store. Each slot has one writer (this rank), which writes into a peer's call only
// after that peer said it is ready for it, so setting the slot never lowers a later epoch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/common/nvshmem_launch.hpp"
#include "tilelink/ops/common/reduce_kernels.cuh"
#include "tilelink/tile/nvshmem.cuh"

namespace tilelink::ops {

namespace {

struct NvshmemPush {
  template <class T>
  static TL_DEVICE void unit(const detail::Worker& wk, const ReduceParams<T>& p, const Unit& u, int32_t b) {
    const int64_t n = p.rb.n, rpr = p.rb.rows_per_rank();
    // Rank b's slot for me, as an address in my own stage buffer (symmetric).
    T* dst = detail::at(p.stage + int64_t(p.team.rank) * rpr * n, n, u, int32_t(b * rpr));
    tile::tile_push_rows(tile::nvshmem, wk.coop, p.team, dst, n * int64_t(sizeof(T)), detail::at(p.partial, n, u),
                         n * int64_t(sizeof(T)), u.rows, u.cols * int64_t(sizeof(T)), b);
    tile::peer_tile_notify(tile::nvshmem, wk.coop, p.team, tile::SlotPerTile{}, p.unit_signals, p.rb.unit_slot(u), b);
  }
  // The next call's GEMM overwrites the partial: every push must have read it first.
  static TL_DEVICE void finish() { tile::pushes_complete(tile::nvshmem, tile::Block{}); }
};

}  // namespace

template <class T>
cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<T>& p, int blocks, cudaStream_t stream) {
  full_mesh_reduce_kernel<T, NvshmemPush><<<blocks, kReduceThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<__nv_bfloat16>&, int, cudaStream_t);
template cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<__half>&, int, cudaStream_t);

}  // namespace tilelink::ops
