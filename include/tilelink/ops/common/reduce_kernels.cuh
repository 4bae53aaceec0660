// tilelink/ops/common/reduce_kernels.cuh — the communication side of GEMM-ReduceScatter and
// GEMM-AllReduce: a few blocks that consume the GEMM's notified tiles, reduce them across ranks
// in fp32 and move them, in an order that keeps every rank busy (tile order + ring steps).
//
// Units (row_blocks.cuh) are GEMM tiles cut at rank-block boundaries. Rank p's GEMM visits rank
// blocks p+1, p+2, …, p (Rotate), and each algorithm consumes units in that order:
//
//   ring        step s handles block b = p+1+s: add my partial to the running sum that rank p+1
//               passed on (none at s=0) and pass it to rank p-1; at the last step b == p and the
//               sum is final. push: I write the sum into p-1's buffer; pull: p-1 reads it from
//               mine. Every link carries one block per step — the bandwidth-optimal schedule.
//   full_mesh   push: my partial of block b goes straight to rank b's slot for me; rank b sums
//               its W slots at the end. pull: rank b reads every rank's partial of its block.
//               One hop, W-1 links per block: the latency-optimal schedule (small M).
//   allreduce   one_shot: every rank reads every rank's partial of every unit and sums (small
//               M). two_shot: full-mesh pull of my block, then push of the sum to every rank.
//
// Buffer hand-over between calls (no reset, bounded waits only):
//   * a rank writes into a peer's buffer only after that peer's `ready` slot holds this call's
//     epoch (set by the peer's stream when the call starts there, i.e. after it finished reading
//     the buffer in its previous call);
//   * a rank whose buffer peers *read* waits, before its call ends, until its `reads_done`
//     counter reached `reads_expected` (this call's reading blocks: every one adds 1 after its
//     last read), then takes them off again, so the next call may overwrite and finds the counter
//     back where it was. No peer adds for the next call before this rank's next call tells it
//     (ready, tile signals), which comes after this call in stream order. Nothing of it is kept
//     on the host across calls, so a call captured in a CUDA graph replays correctly.
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"
#include "tilelink/ops/common.hpp"
#include "tilelink/ops/common/row_blocks.cuh"
#include "tilelink/ops/common/vec8.cuh"
#include "tilelink/tile/coop.cuh"
#include "tilelink/tile/data.cuh"
#include "tilelink/tile/mapping.cuh"
#include "tilelink/tile/order.cuh"
#include "tilelink/tile/signal.cuh"

namespace tilelink::ops {

enum class ReduceAlgo : int32_t { ring = 0, full_mesh = 1, one_shot = 2, two_shot = 3 };

template <class T>
struct ReduceParams {
  ll::Team team;
  RowBlocks rb;
  const T* partial;              // symmetric [M, N]: this rank's GEMM output
  T* stage;                      // symmetric: ring/two-shot [M, N]; full-mesh push [W, M/W, N]
  T* out;                        // reduce-scatter: [M/W, N] (this rank's rows); all-reduce: [M, N]
  // Slots of tiles and units (tile::SlotPerTile: tile t is slot t).
  const uint64_t* gemm_signals;  // GEMM tile slots: t (local notify) or t*W + src (owner / all)
  uint64_t* unit_signals;        // symmetric: unit slot (ring) or unit slot*W + src
  const uint64_t* ready;         // symmetric [W]
  uint64_t* reads_done;          // symmetric [1]
  uint64_t reads_expected;       // reading blocks of this call
  ReduceAlgo algo;
  CommMode mode;
  int32_t worker_warps;          // warps per worker (detail::Worker): reduce_worker_warps()
};

inline constexpr int kReduceThreads = 512;

// Warps per reduction worker for `units` units on `blocks` blocks: one warp each while every warp
// gets a unit, else the fewest warps that leave no worker idle (powers of two up to the block).
inline int32_t reduce_worker_warps(int64_t units, int blocks) {
  constexpr int32_t kWarpsPerBlock = kReduceThreads / 32;
  int32_t warps = 1;
  while (warps < kWarpsPerBlock && int64_t(blocks) * (kWarpsPerBlock / warps) > units) warps *= 2;
  return warps;
}

#if defined(__CUDACC__)

namespace detail {

// Element (u.row0, u.col0) of a row-major [*, ld] matrix whose row 0 is global row `row_base`.
template <class T>
TL_DEVICE T* at(T* base, int64_t ld, const Unit& u, int32_t row_base = 0) {
  return base + int64_t(u.row0 - row_base) * ld + u.col0;
}

// dst[unit] = sum of srcs[unit], fp32 accumulation in source order (so every algorithm's result
// is a pure function of its inputs), 16-byte accesses (N and tile columns are multiples of 8).
// Each lane keeps kLoadsInFlight independent loads per source in flight: across NVLink a load
// takes microseconds, and one 16-byte load per thread at a time capped a 512-thread block at a
// few GB/s (the reason the first fused reduce-scatter lost to NCCL over NVLink). Loads bypass L1
// (.cg): the data was produced by other SMs or GPUs.
inline constexpr int kLoadsInFlight = 4;

// `src(s)` is source s's element (0, 0), s < nsrc: an array's entries (at most one per load/store
// peer), or slots laid out in a buffer (any number of them: the pushes of a world of any size).
template <class T, class Src>
TL_DEVICE void sum_unit(const Src& src, int nsrc, int64_t ld_src, T* dst, int64_t ld_dst, int rows, int cols,
                        int lane, int lanes) {
  const int vecs = cols / 8, total = rows * vecs;
  for (int first = lane; first < total; first += lanes * kLoadsInFlight) {
    int64_t src_off[kLoadsInFlight], dst_off[kLoadsInFlight];
    bool live[kLoadsInFlight];
#pragma unroll
    for (int j = 0; j < kLoadsInFlight; ++j) {
      const int i = first + j * lanes, r = i / vecs, c = (i % vecs) * 8;
      live[j] = i < total;
      src_off[j] = int64_t(r) * ld_src + c;
      dst_off[j] = int64_t(r) * ld_dst + c;
    }
    float acc[kLoadsInFlight][8] = {};
    for (int s = 0; s < nsrc; ++s) {
      uint4 v[kLoadsInFlight];
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j)
        if (live[j]) v[j] = __ldcg(reinterpret_cast<const uint4*>(src(s) + src_off[j]));
#pragma unroll
      for (int j = 0; j < kLoadsInFlight; ++j)
        if (live[j]) Vec8<T>::add(acc[j], v[j]);
    }
#pragma unroll
    for (int j = 0; j < kLoadsInFlight; ++j)
      if (live[j]) *reinterpret_cast<uint4*>(dst + dst_off[j]) = Vec8<T>::pack(acc[j]);
  }
}

// A reduction worker is a group of `warps` warps (a power of two, 1-16) that takes whole units
// and waits for, sums and publishes each on its own, so one unit's wait or publishing fence
// (microseconds across NVLink) stalls one worker, not the block's other units. One warp per
// worker when there are units for every warp (reduce-scatter of large M: 1.1-1.5x over a worker
// per block, docs/PERF.md); wider workers when units are few (decode-sized all-reduce), so that
// the bytes in flight per SM stay high. Workers take units in increasing order (worker w: w,
// w + count, …), which keeps the cross-rank waits acyclic: a unit only waits for units of
// earlier steps, and every worker reaches those first.
// The worker is the cooperation scope of the tile primitives it calls (a WarpSpan; named barrier
// 0 is __syncthreads', so the workers of a block use 1..per_block, <= 8).
struct Worker {
  tile::WarpSpan coop;
  int32_t id, count;
  static TL_DEVICE Worker make(int32_t warps) {
    const tile::WarpSpan coop = tile::WarpSpan::of_block(warps, 1);
    const int32_t per_block = int32_t(blockDim.x) / coop.lanes;
    return {coop, int32_t(blockIdx.x) * per_block + int32_t(threadIdx.x) / coop.lanes, int32_t(gridDim.x) * per_block};
  }
  TL_DEVICE bool leader() const { return coop.leader(); }
  // The worker's accesses before are ordered before its accesses after (the leader's included).
  TL_DEVICE void sync() const { coop.sync(); }
  template <class T, int kMaxSrc>
  TL_DEVICE void sum(const T* const (&srcs)[kMaxSrc], int nsrc, int64_t ld_src, T* dst, int64_t ld_dst,
                     const Unit& u) const {
    sum_of<T>([&](int s) { return srcs[s]; }, nsrc, ld_src, dst, ld_dst, u);
  }
  template <class T, class Src>
  TL_DEVICE void sum_of(const Src& src, int nsrc, int64_t ld_src, T* dst, int64_t ld_dst, const Unit& u) const {
    sum_unit<T>(src, nsrc, ld_src, dst, ld_dst, u.rows, u.cols, coop.lane, coop.lanes);
  }
};

// Block b visited at step s by rank p (the GEMM's order: p+1, p+2, …, p).
TL_DEVICE int32_t block_at_step(int32_t p, int32_t s, int32_t w) { return (p + 1 + s) % w; }

// The item-th unit when rank p walks the blocks of steps [s_begin, s_end) in order.
TL_DEVICE bool locate(const RowBlocks& rb, int32_t p, int32_t s_begin, int32_t s_end, int32_t item,
                      int32_t* step, Unit* u) {
  for (int32_t s = s_begin; s < s_end; ++s) {
    const int32_t b = block_at_step(p, s, rb.world), n = rb.units_in_block(b);
    if (item < n) {
      *step = s;
      *u = rb.unit(b, item);
      return true;
    }
    item -= n;
  }
  return false;
}

TL_DEVICE int32_t units_in_steps(const RowBlocks& rb, int32_t p, int32_t s_begin, int32_t s_end) {
  int32_t n = 0;
  for (int32_t s = s_begin; s < s_end; ++s) n += rb.units_in_block(block_at_step(p, s, rb.world));
  return n;
}

// The item-th of this rank's pushes — its partials of the other blocks, in step order: waits for
// the unit's GEMM tile and for its owner's "ready", then hands the unit to push(unit, owner).
template <class T, class PushFn>
TL_DEVICE void push_step(const Worker& wk, const ReduceParams<T>& p, int32_t item, PushFn&& push) {
  int32_t s;
  Unit u;
  locate(p.rb, p.team.rank, 0, p.team.num_ranks - 1, item, &s, &u);
  if (wk.leader()) {
    tile::consumer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.gemm_signals, p.rb.gemm_tile(u));
    tile::rank_wait(tile::Thread{}, p.team, p.ready, u.block);
  }
  wk.sync();
  push(u, u.block);
}

// Every block, after its last read of peers' buffers: count itself done on each of them. Block 0
// then waits until this rank's own readers are done, so the next call may overwrite.
template <class T>
TL_DEVICE void finish_reads(const ReduceParams<T>& p, int32_t first_peer_step, int32_t last_peer_step) {
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int32_t s = first_peer_step; s <= last_peer_step; ++s)
      tile::reads_done_notify(tile::Thread{}, p.team, p.reads_done, (p.team.rank + s) % p.team.num_ranks);
    if (blockIdx.x == 0 && p.reads_expected > 0)
      tile::reads_done_wait(tile::Thread{}, p.team, p.reads_done, p.reads_expected);
  }
}

}  // namespace detail

// ---- sum of slices ---------------------------------------------------------------------------
// out[rows, n] = the sum of `nslices` row-major [rows, n] slices stored one after another, fp32
// sums in slice order (every rank that sums the same slices gets the same bits).
// Each block sums a contiguous band of rows. The reduce-scatter that splits its GEMM by rank runs
// it once, after the peers' partials have landed.
template <class T>
__global__ void __launch_bounds__(kReduceThreads)
    sum_slices_kernel(const T* slices, int32_t nslices, int64_t rows, int64_t n, T* out) {
  const int64_t band = (rows + gridDim.x - 1) / gridDim.x, r0 = int64_t(blockIdx.x) * band;
  if (r0 >= rows) return;
  detail::sum_unit<T>([&](int s) { return slices + (int64_t(s) * rows + r0) * n; }, nslices, n, out + r0 * n, n,
                      int(min(band, rows - r0)), int(n), int(threadIdx.x), int(blockDim.x));
}

// ---- ring ----------------------------------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kReduceThreads) ring_reduce_kernel(const ReduceParams<T> p) {
  const int32_t w = p.team.num_ranks, me = p.team.rank;
  const int32_t prev = (me + w - 1) % w, next = (me + 1) % w;
  const int64_t n = p.rb.n;
  const int32_t total = detail::units_in_steps(p.rb, me, 0, w);
  const detail::Worker wk = detail::Worker::make(p.worker_warps);
  for (int32_t item = wk.id; item < total; item += wk.count) {
    int32_t s;
    Unit u;
    detail::locate(p.rb, me, 0, w, item, &s, &u);
    const bool last = s == w - 1;
    const int32_t slot = p.rb.unit_slot(u);
    if (wk.leader()) {
      tile::consumer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.gemm_signals, p.rb.gemm_tile(u));
      // The running sum rank next passed on.
      if (s > 0) tile::consumer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.unit_signals, slot);
      if (!last && p.mode == CommMode::push) tile::rank_wait(tile::Thread{}, p.team, p.ready, prev);
    }
    wk.sync();
    const T* srcs[2] = {detail::at(p.partial, n, u), nullptr};
    if (s > 0)
      srcs[1] = p.mode == CommMode::push ? detail::at<const T>(p.stage, n, u)
                                         : detail::at<const T>(tile::peer_view(p.team, p.stage, next), n, u);
    T* dst = last ? detail::at(p.out, n, u, p.rb.block_begin(me))
                  : detail::at(p.mode == CommMode::push ? tile::peer_view(p.team, p.stage, prev) : p.stage, n, u);
    wk.sum<T, 2>(srcs, s > 0 ? 2 : 1, n, dst, n, u);
    if (!last)
      tile::producer_tile_notify<tile::Notify::owner>(wk.coop, p.team, tile::SlotPerTile{0, prev}, p.unit_signals,
                                                      slot);
  }
  // Pull: I read rank next's stage buffer; rank prev reads mine.
  if (p.mode == CommMode::pull && w > 1) detail::finish_reads(p, 1, 1);
}

// ---- full mesh (reduce-scatter) -----------------------------------------------------------
namespace detail {

// How the full-mesh push moves a unit of this rank's partial into rank b's stage slot for it and
// tells b; finish() runs once per block at the end. By load/store here; over NVSHMEM
// put-with-signal for peers load/store cannot reach (src/ops/common/reduce_nvshmem.cu).
struct LoadStorePush {
  template <class T>
  static TL_DEVICE void unit(const Worker& wk, const ReduceParams<T>& p, const Unit& u, int32_t b) {
    const int64_t n = p.rb.n, rpr = p.rb.rows_per_rank();
    // Rank b's slot for me: [me][row - b*rpr][col] of its stage buffer.
    T* dst = at(tile::peer_view(p.team, p.stage, b) + int64_t(p.team.rank) * rpr * n, n, u, int32_t(b * rpr));
    const T* srcs[1] = {at(p.partial, n, u)};
    wk.sum<T, 1>(srcs, 1, n, dst, n, u);
    tile::peer_tile_notify(wk.coop, p.team, tile::SlotPerTile{}, p.unit_signals, p.rb.unit_slot(u), b);
  }
  static TL_DEVICE void finish() {}
};

}  // namespace detail

template <class T, class Push = detail::LoadStorePush>
__global__ void __launch_bounds__(kReduceThreads) full_mesh_reduce_kernel(const ReduceParams<T> p) {
  constexpr int kMaxSrc = ll::kMaxLocalRanks;
  const int32_t w = p.team.num_ranks, me = p.team.rank;
  const int64_t n = p.rb.n;
  const int32_t rpr = p.rb.rows_per_rank();
  const int32_t own = p.rb.units_in_block(me);
  // push: first my partials of the other blocks (steps 0..w-2), then my own block (step w-1).
  const int32_t pushes = p.mode == CommMode::push ? detail::units_in_steps(p.rb, me, 0, w - 1) : 0;
  const detail::Worker wk = detail::Worker::make(p.worker_warps);
  for (int32_t item = wk.id; item < pushes + own; item += wk.count) {
    if (item < pushes) {
      detail::push_step(wk, p, item, [&](const Unit& u, int32_t b) { Push::unit(wk, p, u, b); });
      continue;
    }
    const Unit u = p.rb.unit(me, item - pushes);
    const int32_t slot = p.rb.unit_slot(u), t = p.rb.gemm_tile(u);
    if (wk.leader()) {
      for (int32_t q = 0; q < w; ++q) {
        if (p.mode == CommMode::pull)  // the GEMM of every rank notified me, the owner, in slot t*W + q
          tile::peer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.gemm_signals, t, q);
        else if (q == me)
          tile::consumer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.gemm_signals, t);
        else
          tile::peer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.unit_signals, slot, q);
      }
    }
    wk.sync();
    T* const out = detail::at(p.out, n, u, me * rpr);
    if (p.mode == CommMode::pull) {  // every partial in its owner's heap: load/store peers only
      const T* srcs[kMaxSrc] = {};
      for (int32_t q = 0; q < w; ++q) srcs[q] = detail::at<const T>(tile::peer_view(p.team, p.partial, q), n, u);
      wk.sum<T, kMaxSrc>(srcs, w, n, out, n, u);
    } else {  // every partial in my stage slots, one per rank: any world size
      wk.sum_of<T>([&](int32_t q) {
        return q == me ? detail::at<const T>(p.partial, n, u) : detail::at<const T>(p.stage + int64_t(q) * rpr * n, n, u, me * rpr);
      }, w, n, out, n, u);
    }
  }
  if (p.mode == CommMode::pull && w > 1) detail::finish_reads(p, 1, w - 1);
  Push::finish();
}

// ---- all-reduce -----------------------------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kReduceThreads) allreduce_kernel(const ReduceParams<T> p) {
  constexpr int kMaxSrc = ll::kMaxLocalRanks;  // every peer's partial read by load/store
  const int32_t w = p.team.num_ranks, me = p.team.rank;
  const int64_t n = p.rb.n;
  // one_shot: p.rb has a single block (all rows, no owner); every rank reduces every unit,
  // starting at a different one so the ranks' reads spread over the peers. two_shot: my block's
  // units (reduce + push to everyone), then the other blocks' units (wait + copy from my stage).
  const bool one_shot = p.algo == ReduceAlgo::one_shot;
  const int32_t own = one_shot ? p.rb.units_in_block(0) : p.rb.units_in_block(me);
  const int32_t total = one_shot ? own : detail::units_in_steps(p.rb, me, 0, w);
  const detail::Worker wk = detail::Worker::make(p.worker_warps);
  for (int32_t item = wk.id; item < total; item += wk.count) {
    int32_t s;
    Unit u;
    bool reduce = true;
    if (one_shot) {
      u = p.rb.unit(0, (item + int64_t(me) * total / w) % total);
    } else if (item < own) {
      u = p.rb.unit(me, item);
    } else {
      detail::locate(p.rb, me, 0, w - 1, item - own, &s, &u);
      reduce = false;
    }
    const int32_t slot = p.rb.unit_slot(u), t = p.rb.gemm_tile(u);
    if (reduce) {
      if (wk.leader()) {
        for (int32_t q = 0; q < w; ++q) tile::peer_tile_wait(tile::Thread{}, p.team, tile::SlotPerTile{}, p.gemm_signals, t, q);
        if (!one_shot)
          for (int32_t q = 0; q < w; ++q)
            if (q != me) tile::rank_wait(tile::Thread{}, p.team, p.ready, q);
      }
      wk.sync();
      const T* srcs[kMaxSrc] = {};
      for (int32_t q = 0; q < w; ++q) srcs[q] = detail::at<const T>(tile::peer_view(p.team, p.partial, q), n, u);
      wk.sum<T, kMaxSrc>(srcs, w, n, detail::at(p.out, n, u), n, u);
      if (!one_shot) {
        // Broadcast the finished unit into every peer's stage buffer, then tell it.
        wk.sync();
        const T* mine[1] = {detail::at<const T>(p.out, n, u)};
        for (int32_t q = 0; q < w; ++q)
          if (q != me)
            wk.sum<T, 1>(mine, 1, n, detail::at(tile::peer_view(p.team, p.stage, q), n, u), n, u);
        tile::peer_tile_notify(wk.coop, p.team, tile::SlotPerTile{}, p.unit_signals, slot, tile::RankSet{0, w - 1, me});
      }
    } else {
      tile::peer_tile_wait(wk.coop, p.team, tile::SlotPerTile{}, p.unit_signals, slot, u.block);
      const T* srcs[1] = {detail::at<const T>(p.stage, n, u)};
      wk.sum<T, 1>(srcs, 1, n, detail::at(p.out, n, u), n, u);
    }
  }
  if (w > 1) detail::finish_reads(p, 1, w - 1);
}

#endif  // __CUDACC__

}  // namespace tilelink::ops
