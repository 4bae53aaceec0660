// The reductions over NVSHMEM put-with-signal (nvshmem_launch.hpp), for peers load/store cannot
// reach: every byte between ranks is a push, and a rank only ever waits on its own slots.
//
//   launch_full_mesh_push_nvshmem   the full-mesh push reduce-scatter with its push step swapped:
//                                   a unit's rows go to their owner's stage slot for this rank (one
//                                   warp per row), then the slot's signal, after a fence.
//   launch_allreduce_push_nvshmem   two-shot all-reduce by pushes: that reduce-scatter, then each
//                                   owner pushes its finished units into every peer's copy.
//
// Each slot has one writer (this rank), which writes into a peer's call only after that peer
// said it is ready for it, so setting the slot never lowers a later epoch.
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
    const int64_t n = p.rb.n;
    // Rank b's slot for me, as an address in my own stage buffer (symmetric).
    T* dst = detail::at(p.stage + int64_t(p.team.rank) * p.rb.max_block_rows() * n, n, u, p.rb.block_begin(b));
    tile::tile_push_rows(tile::nvshmem, wk.coop, p.team, dst, n * int64_t(sizeof(T)), detail::at(p.partial, n, u),
                         n * int64_t(sizeof(T)), u.rows, u.cols * int64_t(sizeof(T)), b);
    tile::peer_tile_notify(tile::nvshmem, wk.coop, p.team, tile::SlotPerTile{}, p.unit_signals, p.rb.unit_slot(u), b);
  }
  // The next call's GEMM overwrites the partial: every push must have read it first.
  static TL_DEVICE void finish() { tile::pushes_complete(tile::nvshmem, tile::Block{}); }
};

// Two-shot all-reduce, every byte pushed. Stage (symmetric): [W][rmax][N] slots, where owner b
// receives each rank's partial of its block (rmax = ceil(M / W), blocks being at most that), then
// `gathered` [M][N], where every block's sum lands: the owner sums into its own rows there and
// pushes them, from there, into the same rows of every peer. A unit's slot (unit slot * W + q)
// means "q's partial arrived" on its owner and "owner q's sum arrived" elsewhere: on any rank
// the two name units of different blocks, so they never meet.
// Each worker takes its units in the order push, reduce (own block), receive: a reduce waits only
// for pushes, which wait for no peer beyond the call's `ready`, and a receive only for reduces,
// so no wait closes a cycle.
template <class T>
__global__ void __launch_bounds__(kReduceThreads) allreduce_push_nvshmem_kernel(const ReduceParams<T> p) {
  const int32_t w = p.team.num_ranks, me = p.team.rank;
  const int64_t n = p.rb.n, row_bytes = n * int64_t(sizeof(T));
  const int64_t rmax = p.rb.max_block_rows();
  T* const gathered = p.stage + int64_t(w) * rmax * n;
  const int32_t pushes = detail::units_in_steps(p.rb, me, 0, w - 1);
  const int32_t own = p.rb.units_in_block(me);
  const detail::Worker wk = detail::Worker::make(p.worker_warps);
  for (int32_t item = wk.id; item < 2 * pushes + own; item += wk.count) {
    int32_t s;
    Unit u;
    if (item < pushes) {  // my partial of block b into b's slot for me
      detail::push_step(wk, p, item, [&](const Unit& pu, int32_t b) { NvshmemPush::unit(wk, p, pu, b); });
      continue;
    }
    if (item >= pushes + own) {  // block u.block's sum, pushed by its owner
      detail::locate(p.rb, me, 0, w - 1, item - pushes - own, &s, &u);
      tile::peer_tile_wait(wk.coop, p.team, tile::SlotPerTile{}, p.unit_signals, p.rb.unit_slot(u), u.block);
      const T* sum[1] = {detail::at<const T>(gathered, n, u)};
      wk.sum<T, 1>(sum, 1, n, detail::at(p.out, n, u), n, u);
      continue;
    }
    u = p.rb.unit(me, item - pushes);  // my own block: sum the W partials, then push the sum
    const int32_t slot = p.rb.unit_slot(u);
    if (wk.leader()) {
      tile::consumer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.gemm_signals, p.rb.gemm_tile(u));
      for (int32_t q = 0; q < w; ++q)
        if (q != me) {
          tile::peer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.unit_signals, slot, q);
          tile::rank_wait(tile::Thread{}, p.team, p.ready, q);
        }
    }
    wk.sync();
    T* sum = detail::at(gathered, n, u);
    wk.sum_of<T>([&](int32_t q) {
      return q == me ? detail::at<const T>(p.partial, n, u)
                     : detail::at<const T>(p.stage + int64_t(q) * rmax * n, n, u, p.rb.block_begin(me));
    }, w, n, sum, n, u);
    __threadfence();  // the sum is visible to the puts below, whoever reads it (a warp, a NIC)
    wk.sync();
    for (int32_t q = 0; q < w; ++q)
      if (q != me) {
        tile::tile_push_rows(tile::nvshmem, wk.coop, p.team, sum, row_bytes, sum, row_bytes, u.rows,
                             u.cols * int64_t(sizeof(T)), q);
        tile::peer_tile_notify(tile::nvshmem, wk.coop, p.team, tile::SlotPerTile{}, p.unit_signals, slot, q);
      }
    const T* mine[1] = {sum};
    wk.sum<T, 1>(mine, 1, n, detail::at(p.out, n, u), n, u);
  }
  // The next call's GEMM overwrites the partial, and its reduce my rows of `gathered`.
  tile::pushes_complete(tile::nvshmem, tile::Block{});
}

}  // namespace

template <class T>
cudaError_t launch_allreduce_push_nvshmem(const ReduceParams<T>& p, int blocks, cudaStream_t stream) {
  allreduce_push_nvshmem_kernel<T><<<blocks, kReduceThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template cudaError_t launch_allreduce_push_nvshmem(const ReduceParams<__nv_bfloat16>&, int, cudaStream_t);
template cudaError_t launch_allreduce_push_nvshmem(const ReduceParams<__half>&, int, cudaStream_t);

template <class T>
cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<T>& p, int blocks, cudaStream_t stream) {
  full_mesh_reduce_kernel<T, NvshmemPush><<<blocks, kReduceThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<__nv_bfloat16>&, int, cudaStream_t);
template cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<__half>&, int, cudaStream_t);

}  // namespace tilelink::ops
