// tilelink/ll/identity.cuh — who am I, how many are we, where is this object on a peer.
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::ll {

TL_HOST_DEVICE int rank(const Team& t) { return t.rank; }
TL_HOST_DEVICE int num_ranks(const Team& t) { return t.num_ranks; }

// Rank r's heap base as mapped here; null where load/store cannot reach it (outside the
// Team's table, or unmapped). On the device this is a select chain over constant indices rather
// than t.heap_base[i]: indexing the kernel-parameter array with a run-time value would make every
// kernel copy its Team to local memory (a 128-byte stack frame per thread).
TL_HOST_DEVICE char* heap_base_of(const Team& t, int r) {
  const int i = r - t.local_first;
#if defined(__CUDA_ARCH__)
  char* b = nullptr;
#pragma unroll
  for (int j = 0; j < kMaxLocalRanks; ++j) b = (i == j) ? t.heap_base[j] : b;
  return b;
#else
  return i >= 0 && i < kMaxLocalRanks ? t.heap_base[i] : nullptr;
#endif
}

// Address of the symmetric object `local` (an address in this rank's heap) on rank `peer`.
// Symmetric objects sit at the same offset in every rank's heap, so this is base arithmetic.
template <class T>
TL_HOST_DEVICE T* symm_at(const Team& t, T* local, int peer) {
  auto offset = reinterpret_cast<const char*>(local) - heap_base_of(t, t.rank);
  return reinterpret_cast<T*>(heap_base_of(t, peer) + offset);
}

// Which rank's heap holds `p` in this rank's address space, or -1 if none does.
TL_HOST_DEVICE int owner_of(const Team& t, const void* p) {
  auto c = reinterpret_cast<const char*>(p);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int i = 0; i < kMaxLocalRanks; ++i)
    if (t.heap_base[i] != nullptr && c >= t.heap_base[i] && c < t.heap_base[i] + t.heap_bytes)
      return t.local_first + i;
  return -1;
}

}  // namespace tilelink::ll
