// tilelink/ll/identity.cuh — who am I, how many are we, where is this object on a peer.
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::ll {

TL_HOST_DEVICE int rank(const Team& t) { return t.rank; }
TL_HOST_DEVICE int num_ranks(const Team& t) { return t.num_ranks; }

// Address of the symmetric object `local` (an address in this rank's heap) on rank `peer`.
// Symmetric objects sit at the same offset in every rank's heap, so this is base arithmetic.
template <class T>
TL_HOST_DEVICE T* symm_at(const Team& t, T* local, int peer) {
  auto offset = reinterpret_cast<const char*>(local) - t.heap_base[t.rank];
  return reinterpret_cast<T*>(t.heap_base[peer] + offset);
}

// Which rank's heap holds `p` in this rank's address space, or -1 if none does.
TL_HOST_DEVICE int owner_of(const Team& t, const void* p) {
  auto c = reinterpret_cast<const char*>(p);
  for (int r = 0; r < t.num_ranks; ++r)
    if (c >= t.heap_base[r] && c < t.heap_base[r] + t.heap_bytes) return r;
  return -1;
}

}  // namespace tilelink::ll
