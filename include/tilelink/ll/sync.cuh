// tilelink/ll/sync.cuh — ordering and all-ranks synchronisation: fence, quiet, barrier_all,
// sync_all.
//
//   fence()              fence.acq_rel.sys: this thread's earlier memory operations are ordered
//                        before its later ones, for observers anywhere in the system.
//   quiet()              completes this thread's outstanding bulk (TMA) stores, fences them
//                        towards the generic proxy, then fence(): every put this thread issued
//                        (putmem_nbi*, tma_store_1d, ...) is complete and ordered before its
//                        later operations, e.g. a release that publishes them.
//   barrier_all_block(t) every thread of ONE block per rank calls it; returns once every rank
//                        arrived. quiet() semantics for the block's puts: everything the block
//                        wrote before (to any rank) is visible to every rank's block after it.
//   barrier_all_warp(t)  the same for ONE warp per rank (all 32 lanes), covering the warp's writes.
//   sync_all_block(t) / sync_all_warp(t)  rendezvous only: no quiet, relaxed arrival and wait,
//                        no data ordering.
//
// Protocol: each rank p keeps num_ranks signal slots Team::barrier_slots; slot r on p holds
// the latest generation rank r announced to p. A barrier (of either kind) reads g = own slot + 1
// on its own rank, writes g into slot `rank` on every rank (release for barrier_all), and waits
// until every slot on its own rank is >= g (acquire for barrier_all), bounded, reported as
// "barrier_all" / "sync_all". Generations only grow, so barriers are reusable any number of
// times per kernel and across kernels and op calls with no reset; ranks that make different
// numbers of barrier calls get a timeout report instead of a hang. At most one block (warp) per
// rank may be inside a barrier at a time, and consecutive barriers of one rank must be ordered
// (same block/warp, or separate kernels). Thread i of the group serves ranks i, i + group size, ...
// Every rank must be reachable by load/store (Context::peers_load_store()).
#pragma once

#include <cstdint>

#include "tilelink/ll/data.cuh"
#include "tilelink/ll/identity.cuh"
#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/ll/team.cuh"
#include "tilelink/ll/tma.cuh"

namespace tilelink::ll {

#if defined(__CUDACC__)

TL_DEVICE void fence() { fence_acq_rel<Scope::sys>(); }

TL_DEVICE void quiet() {
  tma_store_wait<0>();
  fence_proxy_async_global();
  fence_acq_rel<Scope::sys>();
}

namespace detail {

// Misuse, reported through the wait report (no printf: see report_wait_timeout_at).
TL_DEVICE void barrier_slots_missing(const Team& t, const char* site) {
  report_misuse_and_trap(t, Cmp::ne, 0, 0,
                         site[0] == 's' ? "sync_all: Team::barrier_slots is null"
                                        : "barrier_all: Team::barrier_slots is null");
}

TL_DEVICE void barrier_peer_unreachable(const Team& t, const char* site) {
  report_misuse_and_trap(t, Cmp::ne, 0, 0,
                         site[0] == 's' ? "sync_all: a rank is not reachable by load/store"
                                        : "barrier_all: a rank is not reachable by load/store");
}

// Generation of the next barrier of this rank, read by every participating thread (idx <
// num_ranks) BEFORE the group sync that precedes any arrival.
TL_DEVICE uint64_t barrier_next_generation(const Team& t, uint32_t idx, const char* site) {
  if (idx >= uint32_t(t.num_ranks)) return 0;
  if (t.barrier_slots == nullptr) barrier_slots_missing(t, site);
  return ld<Order::relaxed, Scope::sys>(t.barrier_slots + t.rank) + 1;
}

// Thread idx of a group of nthr announces generation g to ranks idx, idx + nthr, ... and waits
// for their arrivals (one peer per thread whenever the group has >= num_ranks threads).
template <bool kOrdered>
TL_DEVICE void barrier_arrive_wait(const Team& t, uint32_t idx, uint32_t nthr, uint64_t g, const char* site) {
  for (uint32_t p = idx; p < uint32_t(t.num_ranks); p += nthr) {
    if (heap_base_of(t, int(p)) == nullptr) barrier_peer_unreachable(t, site);
    uint64_t* remote = symm_at(t, t.barrier_slots + t.rank, int(p));
    if constexpr (kOrdered) st<Order::release, Scope::sys>(remote, g);
    else st<Order::relaxed, Scope::sys>(remote, g);
  }
  for (uint32_t p = idx; p < uint32_t(t.num_ranks); p += nthr) {
    if constexpr (kOrdered)
      signal_wait_until<Scope::sys, Order::acquire>(t, t.barrier_slots + p, Cmp::ge, g, WaitSite{-1, site});
    else
      signal_wait_until<Scope::sys, Order::relaxed>(t, t.barrier_slots + p, Cmp::ge, g, WaitSite{-1, site});
  }
}

}  // namespace detail

TL_DEVICE void barrier_all_block(const Team& t) {
  const uint32_t idx = detail::block_thread_index();
  // Each thread's bulk stores complete and fenced towards the generic proxy; the release stores
  // below are cumulative over everything the block wrote before the __syncthreads.
  tma_store_wait<0>();
  fence_proxy_async_global();
  const uint64_t g = detail::barrier_next_generation(t, idx, "barrier_all");
  __syncthreads();
  detail::barrier_arrive_wait<true>(t, idx, detail::block_thread_count(), g, "barrier_all");
  __syncthreads();
}

TL_DEVICE void barrier_all_warp(const Team& t) {
  const uint32_t idx = detail::lane_id();
  tma_store_wait<0>();
  fence_proxy_async_global();
  const uint64_t g = detail::barrier_next_generation(t, idx, "barrier_all");
  __syncwarp();
  detail::barrier_arrive_wait<true>(t, idx, 32, g, "barrier_all");
  __syncwarp();
}

TL_DEVICE void sync_all_block(const Team& t) {
  const uint32_t idx = detail::block_thread_index();
  const uint64_t g = detail::barrier_next_generation(t, idx, "sync_all");
  __syncthreads();
  detail::barrier_arrive_wait<false>(t, idx, detail::block_thread_count(), g, "sync_all");
  __syncthreads();
}

TL_DEVICE void sync_all_warp(const Team& t) {
  const uint32_t idx = detail::lane_id();
  const uint64_t g = detail::barrier_next_generation(t, idx, "sync_all");
  __syncwarp();
  detail::barrier_arrive_wait<false>(t, idx, 32, g, "sync_all");
  __syncwarp();
}

#endif  // __CUDACC__

}  // namespace tilelink::ll
