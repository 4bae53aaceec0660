// tilelink/ll/data.cuh — SM copies to and from peers: putmem / getmem (+_nbi, per thread, warp,
// block), putmem_signal, and single-value put/get.
//
// Addressing follows OpenSHMEM: the *remote* side of every call is named by its local symmetric
// address (an address in this rank's heap); the primitive translates it to `peer` with symm_at.
// putmem(t, dst, src, bytes, peer): dst is symmetric (written on `peer`), src is any address.
// getmem(t, dst, src, bytes, peer): src is symmetric (read on `peer`), dst is any address.
//
// Scope suffix = who calls: none = one thread; `_warp` = all 32 lanes of a warp, converged, with
// the same arguments; `_block` = every thread of the block, same arguments. The work is split
// over the calling threads. Any size and any alignment is correct: when dst and src have the same
// address modulo 16 the body moves 16-byte vectors (modulo 8/4/2 fall back to narrower words),
// the unaligned head and tail move bytewise.
//
// Memory order: the data stores/loads are weak (plain st.global/ld.global). They become visible
// to a peer only through a later release (signal_op, putmem_signal, barrier_all, quiet + any
// release), and data read from a peer must be guarded by an earlier acquire (signal_wait_until,
// barrier_all). Blocking vs _nbi:
//   putmem*/getmem*       return when every calling thread's part was issued (warp: __syncwarp,
//                         block: __syncthreads at the end): the source may be reused, the get
//                         destination may be read by any calling thread, and any one calling
//                         thread may publish the whole transfer with a release.
//   putmem_nbi*/getmem_nbi*  return as soon as this thread issued its part, with no group sync
//                         and no ordering: call quiet() (and sync the group) before publishing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tilelink/ll/identity.cuh"
#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/ll/team.cuh"

namespace tilelink::ll {

#if defined(__CUDACC__)

namespace detail {

// Flat index of the calling thread in its block, and the block's thread count.
TL_DEVICE uint32_t block_thread_index() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
TL_DEVICE uint32_t block_thread_count() { return blockDim.x * blockDim.y * blockDim.z; }
TL_DEVICE uint32_t lane_id() {
  uint32_t l;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

// Moves `count` words of type V from s to d (both V-aligned), split over threads idx of nthr,
// four independent loads in flight per thread before their stores.
template <class V>
TL_HOST_DEVICE void copy_words(V* d, const V* s, size_t count, uint32_t idx, uint32_t nthr) {
  size_t i = idx;
  const size_t step = nthr;
  for (; i + 3 * step < count; i += 4 * step) {
    V a = s[i], b = s[i + step], c = s[i + 2 * step], e = s[i + 3 * step];
    d[i] = a;
    d[i + step] = b;
    d[i + 2 * step] = c;
    d[i + 3 * step] = e;
  }
  for (; i < count; i += step) d[i] = s[i];
}

// Copies `bytes` from src to dst split over threads idx in [0, nthr). Weak accesses. (Host too,
// so the split can be checked without a GPU.)
TL_HOST_DEVICE void copy_bytes(void* dst, const void* src, size_t bytes, uint32_t idx, uint32_t nthr) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const uintptr_t rel = reinterpret_cast<uintptr_t>(d) ^ reinterpret_cast<uintptr_t>(s);
  const uint32_t w = (rel & 15) == 0 ? 16 : (rel & 7) == 0 ? 8 : (rel & 3) == 0 ? 4 : (rel & 1) == 0 ? 2 : 1;
  if (w == 1) {
    copy_words(reinterpret_cast<uint8_t*>(d), reinterpret_cast<const uint8_t*>(s), bytes, idx, nthr);
    return;
  }
  // Head: bytes until dst (and, having the same residue, src) is w-aligned.
  size_t head = (w - (reinterpret_cast<uintptr_t>(d) & (w - 1))) & (w - 1);
  if (head > bytes) head = bytes;
  const size_t words = (bytes - head) / w;
  const size_t body = words * w;
  const size_t tail = bytes - head - body;
  // Head and tail (each < w bytes) go bytewise, one byte per thread.
  for (size_t i = idx; i < head + tail; i += nthr) {
    size_t off = i < head ? i : head + body + (i - head);
    d[off] = s[off];
  }
  char* db = d + head;
  const char* sb = s + head;
  switch (w) {
    case 16: copy_words(reinterpret_cast<uint4*>(db), reinterpret_cast<const uint4*>(sb), words, idx, nthr); break;
    case 8: copy_words(reinterpret_cast<uint2*>(db), reinterpret_cast<const uint2*>(sb), words, idx, nthr); break;
    case 4: copy_words(reinterpret_cast<uint32_t*>(db), reinterpret_cast<const uint32_t*>(sb), words, idx, nthr); break;
    default: copy_words(reinterpret_cast<uint16_t*>(db), reinterpret_cast<const uint16_t*>(sb), words, idx, nthr); break;
  }
}

}  // namespace detail

// ---- put: local src -> symmetric dst on `peer` ----------------------------------------------
TL_DEVICE void putmem_nbi(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  detail::copy_bytes(symm_at(t, dst, peer), src, bytes, 0, 1);
}
TL_DEVICE void putmem(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  putmem_nbi(t, dst, src, bytes, peer);
}
TL_DEVICE void putmem_nbi_warp(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  detail::copy_bytes(symm_at(t, dst, peer), src, bytes, detail::lane_id(), 32);
}
TL_DEVICE void putmem_warp(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  putmem_nbi_warp(t, dst, src, bytes, peer);
  __syncwarp();
}
TL_DEVICE void putmem_nbi_block(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  detail::copy_bytes(symm_at(t, dst, peer), src, bytes, detail::block_thread_index(),
                     detail::block_thread_count());
}
TL_DEVICE void putmem_block(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  putmem_nbi_block(t, dst, src, bytes, peer);
  __syncthreads();
}

// ---- get: symmetric src on `peer` -> local dst ----------------------------------------------
TL_DEVICE void getmem_nbi(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  detail::copy_bytes(dst, symm_at(t, src, peer), bytes, 0, 1);
}
TL_DEVICE void getmem(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  getmem_nbi(t, dst, src, bytes, peer);
}
TL_DEVICE void getmem_nbi_warp(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  detail::copy_bytes(dst, symm_at(t, src, peer), bytes, detail::lane_id(), 32);
}
TL_DEVICE void getmem_warp(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  getmem_nbi_warp(t, dst, src, bytes, peer);
  __syncwarp();
}
TL_DEVICE void getmem_nbi_block(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  detail::copy_bytes(dst, symm_at(t, src, peer), bytes, detail::block_thread_index(),
                     detail::block_thread_count());
}
TL_DEVICE void getmem_block(const Team& t, void* dst, const void* src, size_t bytes, int peer) {
  getmem_nbi_block(t, dst, src, bytes, peer);
  __syncthreads();
}

// ---- put with signal: data, then a release signal on the destination rank -----------------
// `sig` is a local symmetric signal address; it is updated on `peer` (set or add `value`) with
// release semantics at scope S after the data, so a peer that acquires the signal
// (signal_wait_until) sees the data. The warp/block forms sync the group, then lane/thread 0
// signals (release is cumulative over what the group wrote before the sync).
template <Scope S = Scope::sys>
TL_DEVICE void putmem_signal(const Team& t, void* dst, const void* src, size_t bytes, uint64_t* sig,
                             uint64_t value, SignalOp op, int peer) {
  putmem_nbi(t, dst, src, bytes, peer);
  signal_op<S>(t, sig, value, op, peer);
}
template <Scope S = Scope::sys>
TL_DEVICE void putmem_signal_warp(const Team& t, void* dst, const void* src, size_t bytes,
                                  uint64_t* sig, uint64_t value, SignalOp op, int peer) {
  putmem_warp(t, dst, src, bytes, peer);
  if (detail::lane_id() == 0) signal_op<S>(t, sig, value, op, peer);
  __syncwarp();
}
template <Scope S = Scope::sys>
TL_DEVICE void putmem_signal_block(const Team& t, void* dst, const void* src, size_t bytes,
                                   uint64_t* sig, uint64_t value, SignalOp op, int peer) {
  putmem_block(t, dst, src, bytes, peer);
  if (detail::block_thread_index() == 0) signal_op<S>(t, sig, value, op, peer);
}

// ---- single values (shmem_p / shmem_g): weak, one thread ------------------------------------
template <class T>
TL_DEVICE void put_value(const Team& t, T* dst, T value, int peer) {
  *symm_at(t, dst, peer) = value;
}
template <class T>
TL_DEVICE T get_value(const Team& t, const T* src, int peer) {
  return *symm_at(t, src, peer);
}

#endif  // __CUDACC__

}  // namespace tilelink::ll
