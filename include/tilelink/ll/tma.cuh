// tilelink/ll/tma.cuh — Hopper bulk copies (cp.async.bulk, "TMA 1D") to and from peers.
//
// Thin wrappers (one thread calls; no group semantics):
//   mbarrier_init / mbarrier_inval / fence_mbarrier_init / mbarrier_arrive_expect_tx /
//   mbarrier_try_wait / mbarrier_wait (bounded, reports like signal_wait_until),
//   tma_load_1d   global -> shared, completion counted in bytes on an mbarrier,
//   tma_store_1d  shared -> global (local or a peer's address), in the thread's bulk group,
//   tma_store_commit, tma_store_wait<N> (all but the newest N groups have written global memory),
//   tma_store_wait_read<N> (... have finished reading shared memory, which may then be reused).
// Every bulk operand must be 16-byte aligned and every size a multiple of 16.
//
// Proxies: TMA runs in the async proxy. Before a bulk copy reads global data that generic stores
// (or an acquire of a peer's flag) made visible, execute fence_proxy_async_global(); before a bulk
// store reads shared memory written by threads, each writer executes
// fence_proxy_async_shared_cta() and the group syncs. After bulk stores, tma_store_wait<0>()
// then fence_proxy_async_global() before a generic release publishes the data (quiet() does both).
//
// Block copies (every thread of the block calls, same arguments):
//   putmem_tma_block(t, dst, src, bytes, peer, smem, smem_bytes)   local src -> symmetric dst on peer
//   getmem_tma_block(t, dst, src, bytes, peer, smem, smem_bytes)   symmetric src on peer -> local dst
//   putmem_signal_tma_block<S>(..., sig, value, op, peer, smem, smem_bytes)  then release signal
// They stage through the caller's shared buffer `smem` (any 16-byte-alignable shared address,
// smem_bytes >= 160; 64 KiB + 128 gives 4 stages of 16 KiB): thread 0 pipelines bulk loads into
// the stages (mbarrier completion) and bulk stores out of them. The unaligned head and tail
// (< 16 bytes each) are copied with plain stores by the other threads; if dst and src differ in
// address modulo 16 the whole copy falls back to the SM path (putmem_block). They return when
// all data is written (bulk stores complete and fenced towards the generic proxy) and the block
// synced: a following release by any thread of the block publishes it, and `smem` is free again.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tilelink/ll/data.cuh"
#include "tilelink/ll/identity.cuh"
#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/ll/team.cuh"
#include "tilelink/ll/timer.cuh"

namespace tilelink::ll {

#if defined(__CUDACC__)

// Largest chunk one stage moves per bulk operation (mbarrier tx-count is < 2^20).
inline constexpr uint32_t kTmaMaxChunk = 256u * 1024u;
// Bytes at the start of the staging buffer kept for the stage mbarriers.
inline constexpr uint32_t kTmaBarrierBytes = 128;

TL_DEVICE uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarrier ------------------------------------------------------------------------------
TL_DEVICE void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}
TL_DEVICE void mbarrier_inval(uint64_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Makes mbarrier inits visible to the async proxy and to other threads (release, cluster scope).
TL_DEVICE void fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// Arrives once on `bar` and adds `bytes` to the transaction count the phase waits for.
TL_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
// True once the phase with parity `parity` completed (acquire, cta scope).
TL_DEVICE bool mbarrier_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits (bounded by Team::wait_timeout_ns) for the phase with parity `parity` of `bar`. An
// mbarrier completes by this block's own arrivals and bulk copies, which always finish, so it
// does not watch the call's abort; on a timeout it reports and raises it like signal_wait_until.
TL_DEVICE void mbarrier_wait(const Team& t, uint64_t* bar, uint32_t parity,
                             WaitSite site = {-1, "mbarrier_wait"}) {
  if (mbarrier_try_wait(bar, parity)) return;
  const uint64_t start = globaltimer();
  while (!mbarrier_try_wait(bar, parity)) {
    const uint64_t waited = globaltimer() - start;
    if (waited > t.wait_timeout_ns) {
      report_wait_timeout(t, bar, Cmp::eq, parity, parity ^ 1u, waited, site);
      return;
    }
  }
}

// ---- bulk copies -----------------------------------------------------------------------------
// global -> shared; completes `bytes` transactions on `bar` (which expects them).
TL_DEVICE void tma_load_1d(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_u32(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
// shared -> global (any mapped global address, e.g. symm_at(t, p, peer)); joins the current
// bulk group of this thread.
TL_DEVICE void tma_store_1d(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_u32(smem_src)), "r"(bytes)
               : "memory");
}
TL_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// All but the newest N committed bulk groups of this thread are complete (writes performed).
template <int N = 0>
TL_DEVICE void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
// All but the newest N committed bulk groups of this thread finished reading their sources.
template <int N = 0>
TL_DEVICE void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

namespace detail {

struct TmaStaging {
  uint64_t* bars;
  char* data;
  uint32_t stages;
  uint32_t chunk;
};

// Misuse (staging buffer not in shared memory, or too small), reported through the wait report
// (expected: the minimum size, observed: the size given); no printf, see report_wait_timeout_at.
TL_DEVICE void tma_staging_too_small(const Team& t, uint32_t smem_bytes) {
  report_misuse_and_trap(t, Cmp::ge, kTmaBarrierBytes + 32u, smem_bytes,
                         "tma block copy: smem not shared or too small");
}

TL_DEVICE TmaStaging tma_staging(const Team& t, void* smem, uint32_t smem_bytes) {
  const uintptr_t raw = reinterpret_cast<uintptr_t>(smem);
  const uintptr_t base = (raw + 15) & ~uintptr_t(15);
  const uint32_t lost = uint32_t(base - raw) + kTmaBarrierBytes;
  const uint32_t avail = smem_bytes > lost ? smem_bytes - lost : 0;
  TmaStaging s;
  s.stages = avail >= 4u * 4096u ? 4u : avail >= 2u * 1024u ? 2u : 1u;
  s.chunk = (avail / s.stages) & ~15u;
  if (s.chunk > kTmaMaxChunk) s.chunk = kTmaMaxChunk;
  if (!__isShared(smem) || s.chunk < 16u) tma_staging_too_small(t, smem_bytes);
  s.bars = reinterpret_cast<uint64_t*>(base);
  s.data = reinterpret_cast<char*>(base + kTmaBarrierBytes);
  return s;
}

// The schedule of a staged bulk copy, separate from the instructions so the host can check it
// with a model (Ops is the device implementation below, or a simulator): chunk k of `body` goes
// through stage k % stages; loads run up to `stages` chunks ahead of the stores; a stage is
// reloaded only after the store out of it finished reading it.
//   ops.load(k, stage, offset, len)    bulk load of chunk k into the stage (mbarrier completion)
//   ops.wait(k, stage, parity)         wait for the stage's phase of that parity (chunk k landed)
//   ops.store(k, stage, offset, len)   bulk store of chunk k out of the stage; ops.commit()
//   ops.wait_read(n)                   all but the newest n store groups finished reading
#pragma nv_exec_check_disable
template <class Ops>
TL_HOST_DEVICE void tma_schedule_load(Ops& ops, size_t k, size_t body, uint32_t stages, uint32_t chunk) {
  const size_t left = body - k * chunk;
  ops.load(k, uint32_t(k % stages), k * chunk, left < chunk ? uint32_t(left) : chunk);
}

#pragma nv_exec_check_disable
template <class Ops>
TL_HOST_DEVICE void tma_schedule(Ops& ops, size_t body, uint32_t stages, uint32_t chunk) {
  const size_t nchunks = (body + chunk - 1) / chunk;
  const size_t prologue = nchunks < stages ? nchunks : stages;
  for (size_t k = 0; k < prologue; ++k) tma_schedule_load(ops, k, body, stages, chunk);
  for (size_t k = 0; k < nchunks; ++k) {
    const uint32_t stage = uint32_t(k % stages);
    const size_t left = body - k * chunk;
    ops.wait(k, stage, uint32_t((k / stages) & 1u));
    ops.store(k, stage, k * chunk, left < chunk ? uint32_t(left) : chunk);
    ops.commit();
    if (stages == 1) {
      // One stage: the store just issued must finish reading it before the next load lands.
      if (k + 1 < nchunks) {
        ops.wait_read(0);
        tma_schedule_load(ops, k + 1, body, stages, chunk);
      }
    } else if (k >= 1 && k - 1 + stages < nchunks) {
      // Refill the stage of chunk k-1 (its store was issued one iteration ago) with chunk
      // k-1+stages, keeping the newest store in flight.
      ops.wait_read(1);
      tma_schedule_load(ops, k - 1 + stages, body, stages, chunk);
    }
  }
}

// The device side of tma_schedule: PTX bulk copies and mbarriers, issued by one thread.
struct TmaDeviceOps {
  const Team& t;
  char* d;
  const char* s;
  const TmaStaging& st;
  const char* site;
  TL_DEVICE char* stage_data(uint32_t stage) const { return st.data + size_t(stage) * st.chunk; }
  TL_DEVICE void load(size_t, uint32_t stage, size_t offset, uint32_t len) {
    mbarrier_arrive_expect_tx(&st.bars[stage], len);
    tma_load_1d(stage_data(stage), s + offset, len, &st.bars[stage]);
  }
  TL_DEVICE void wait(size_t, uint32_t stage, uint32_t parity) {
    mbarrier_wait(t, &st.bars[stage], parity, WaitSite{-1, site});
  }
  TL_DEVICE void store(size_t, uint32_t stage, size_t offset, uint32_t len) {
    tma_store_1d(d + offset, stage_data(stage), len);
  }
  TL_DEVICE void commit() { tma_store_commit(); }
  TL_DEVICE void wait_read(int newest_pending) {
    if (newest_pending == 0) tma_store_wait_read<0>();
    else tma_store_wait_read<1>();
  }
};

// Issued by one thread: moves `body` bytes (multiple of 16, both ends 16-aligned) from s to d
// through the staging buffer. Returns with every bulk store complete and fenced towards the
// generic proxy, and the stage mbarriers invalidated.
TL_DEVICE void tma_pipeline(const Team& t, char* d, const char* s, size_t body, const TmaStaging& st,
                            const char* site) {
  for (uint32_t i = 0; i < st.stages; ++i) mbarrier_init(&st.bars[i], 1);
  fence_mbarrier_init();
  fence_proxy_async_shared_cta();
  TmaDeviceOps ops{t, d, s, st, site};
  tma_schedule(ops, body, st.stages, st.chunk);
  tma_store_wait<0>();
  fence_proxy_async_global();
  for (uint32_t i = 0; i < st.stages; ++i) mbarrier_inval(&st.bars[i]);
}

// Block-wide copy d <- s through shared memory with TMA (see the header comment).
TL_DEVICE void copy_tma_block(const Team& t, void* dst, const void* src, size_t bytes, void* smem,
                              uint32_t smem_bytes, const char* site) {
  const uint32_t tid = block_thread_index();
  const uint32_t nthr = block_thread_count();
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Every thread's earlier generic accesses (writes of src, acquires of flags guarding it) are
  // ordered before the bulk copies thread 0 issues after the __syncthreads below; so are their
  // earlier generic writes of the staging buffer, which bulk loads are about to overwrite.
  fence_proxy_async_global();
  fence_proxy_async_shared_cta();
  if (((reinterpret_cast<uintptr_t>(d) ^ reinterpret_cast<uintptr_t>(s)) & 15u) != 0) {
    copy_bytes(d, s, bytes, tid, nthr);
    __syncthreads();
    return;
  }
  size_t head = (16u - (reinterpret_cast<uintptr_t>(d) & 15u)) & 15u;
  if (head > bytes) head = bytes;
  const size_t body = (bytes - head) & ~size_t(15);
  const size_t tail = bytes - head - body;
  // Head and tail bytes by the last threads (thread 0 issues the bulk copies).
  for (size_t i = nthr - 1 - tid; i < head + tail; i += nthr) {
    const size_t off = i < head ? i : head + body + (i - head);
    d[off] = s[off];
  }
  if (body != 0) {
    __syncthreads();
    if (tid == 0) tma_pipeline(t, d + head, s + head, body, tma_staging(t, smem, smem_bytes), site);
  }
  __syncthreads();
}

}  // namespace detail

TL_DEVICE void putmem_tma_block(const Team& t, void* dst, const void* src, size_t bytes, int peer,
                                void* smem, uint32_t smem_bytes) {
  detail::copy_tma_block(t, symm_at(t, dst, peer), src, bytes, smem, smem_bytes, "putmem_tma_block");
}

TL_DEVICE void getmem_tma_block(const Team& t, void* dst, const void* src, size_t bytes, int peer,
                                void* smem, uint32_t smem_bytes) {
  detail::copy_tma_block(t, dst, symm_at(t, src, peer), bytes, smem, smem_bytes, "getmem_tma_block");
}

// putmem_tma_block, then thread 0 sets/adds `value` on the signal `sig` of `peer` (release, S).
template <Scope S = Scope::sys>
TL_DEVICE void putmem_signal_tma_block(const Team& t, void* dst, const void* src, size_t bytes,
                                       uint64_t* sig, uint64_t value, SignalOp op, int peer,
                                       void* smem, uint32_t smem_bytes) {
  putmem_tma_block(t, dst, src, bytes, peer, smem, smem_bytes);
  if (detail::block_thread_index() == 0) signal_op<S>(t, sig, value, op, peer);
}

#endif  // __CUDACC__

}  // namespace tilelink::ll
