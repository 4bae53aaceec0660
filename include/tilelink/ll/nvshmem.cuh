// tilelink/ll/nvshmem.cuh — the NVSHMEM backend of the ll primitives: how a rank reaches a peer
// it cannot address by load/store (another node over InfiniBand; every peer under the
// one-node-per-process setting).
//
// The backend is a policy, passed as a tag first argument; the primitive names are the load/store
// contract's (data.cuh, signal.cuh):
//
//   putmem_nbi(nvshmem, scope, team, dst, src, bytes, peer)
//       the bytes into `dst` on `peer`; ordered before a later signal_set to that peer.
//   putmem_signal_nbi(nvshmem, scope, team, dst, src, bytes, sig, value, peer)
//       the bytes, then `sig` on `peer` set to `value`, ordered after them (NVSHMEM's
//       put-with-signal). Non-blocking: `src` may be overwritten only after quiet(nvshmem).
//   signal_set(nvshmem, team, sig, value, peer)      one signal update on `peer`, ordered after
//                                                    this PE's earlier puts to it (fence first)
//   quiet(nvshmem)                                   every put this PE issued has completed
//   attach_nvshmem_device_state()                    (host) this module's device state registered
//
// Addresses are this rank's symmetric addresses (inside its heap, which the NVSHMEM transport
// takes from nvshmem_malloc); rank r is PE r (the transport checks it when it joins NVSHMEM).
// `src` must be readable by the NIC on another node: symmetric memory, not a user's tensor.
//
// Signals are epoch flags as everywhere (signal.cuh); NVSHMEM updates them with set (it has set
// and add, no max). Set cannot lower a later call's epoch where each slot has one writer per call
// and that writer's calls are ordered by a handshake — the ops that use this backend see to it.
//
// Only translation units built with relocatable device code and device-linked against
// libnvshmem_device.a include this header: libtilelink_nvshmem_device.so's
// (src/runtime/CMakeLists.txt) and a program's own (tilelink-bench's, tools/CMakeLists.txt).
#pragma once

#if !defined(TILELINK_NVSHMEM_DEVICE)
#error "tilelink/ll/nvshmem.cuh needs relocatable device code linked against libnvshmem_device.a (TILELINK_NVSHMEM_DEVICE)"
#endif

#include <nvshmem.h>
#include <nvshmemx.h>

#include <cstddef>
#include <cstdint>

#include "tilelink/ll/identity.cuh"
#include "tilelink/ll/team.cuh"

namespace tilelink::ll {

struct Nvshmem {};
inline constexpr Nvshmem nvshmem{};

// Who moves the bytes of one put: NVSHMEM's thread, warp and block forms.
enum class PutScope { thread, warp, block };

// Whether rank `peer` is reachable by load/store from here (the load/store backend applies).
TL_HOST_DEVICE bool load_store_reachable(const Team& t, int peer) { return heap_base_of(t, peer) != nullptr; }

// Host: registers the calling module's copy of NVSHMEM's device state with NVSHMEM, which must be
// initialised; NVSHMEM then fills it in and keeps it current. Every module (shared library or
// executable) that links NVSHMEM's device library has its own copy, so each calls this once —
// inline, so that it reaches that module's own copy. Returns NVSHMEM's status (0: done).
inline int attach_nvshmem_device_state() {
  // NVSHMEM's initialisation from a program with its device library: with NVSHMEM initialised
  // already it only records where this copy lives and fills it in (no second bootstrap).
  int provided = 0;
  const nvshmemi_version_t version{NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION,
                                   NVSHMEM_VENDOR_PATCH_VERSION};
  return nvshmemi_init_thread(NVSHMEM_THREAD_SERIALIZED, &provided, 0, nullptr, version);
}

#if defined(__CUDACC__)

template <PutScope S>
TL_DEVICE void putmem_nbi(Nvshmem, const Team&, void* dst, const void* src, size_t bytes, int peer) {
  if constexpr (S == PutScope::block) nvshmemx_putmem_nbi_block(dst, src, bytes, peer);
  else if constexpr (S == PutScope::warp) nvshmemx_putmem_nbi_warp(dst, src, bytes, peer);
  else nvshmem_putmem_nbi(dst, src, bytes, peer);
}

template <PutScope S>
TL_DEVICE void putmem_signal_nbi(Nvshmem, const Team&, void* dst, const void* src, size_t bytes, uint64_t* sig,
                                 uint64_t value, int peer) {
  if constexpr (S == PutScope::block)
    nvshmemx_putmem_signal_nbi_block(dst, src, bytes, sig, value, NVSHMEM_SIGNAL_SET, peer);
  else if constexpr (S == PutScope::warp)
    nvshmemx_putmem_signal_nbi_warp(dst, src, bytes, sig, value, NVSHMEM_SIGNAL_SET, peer);
  else
    nvshmem_putmem_signal_nbi(dst, src, bytes, sig, value, NVSHMEM_SIGNAL_SET, peer);
}

TL_DEVICE void signal_set(Nvshmem, const Team&, uint64_t* sig, uint64_t value, int peer) {
  nvshmem_fence();
  nvshmemx_signal_op(sig, value, NVSHMEM_SIGNAL_SET, peer);
}

TL_DEVICE void quiet(Nvshmem) { nvshmem_quiet(); }

#endif  // __CUDACC__

}  // namespace tilelink::ll
