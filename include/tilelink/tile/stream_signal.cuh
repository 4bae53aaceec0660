// tilelink/tile/stream_signal.cuh — signals in stream order, at the epoch the device holds.
//
//   stream_notify(stream, team, spans)                    raise every slot of `spans` to the
//                                                         call's epoch (release, system scope)
//   stream_wait(stream, team, signals, n, skip[, at_least])
//                                                         wait until slots [0, n) of `signals`,
//                                                         but `skip`, hold the call's epoch (or
//                                                         the value in the device word at_least)
//
// The copy-engine paths publish a chunk after its copy, and ops hand buffers over between calls,
// in stream order. Both read the epoch on the device when they run (ll::call_epoch), never a value
// the host baked in at launch: a call captured in a CUDA graph advances the epoch on the device at
// every replay, and these follow it. Each is one small block: ranks sharing a GPU keep an SM of
// their share free for such kernels (see ag_gemm). Waits are bounded and report like every other
// wait; unlike cuStreamWaitValue they cannot hang.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/core/error.hpp"

namespace tilelink::tile {

// `count` consecutive slots from `first` (local or a peer's, as mapped here).
struct SlotSpan {
  uint64_t* first;
  int32_t count = 1;
};

inline constexpr int kMaxSpansPerNotify = 16;
inline constexpr int kStreamSignalThreads = 128;

struct SlotSpans {
  SlotSpan span[kMaxSpansPerNotify];
  int32_t size;
};

#if defined(__CUDACC__)

// Templates only so that every translation unit may include them.
template <int = 0>
__global__ void __launch_bounds__(kStreamSignalThreads) notify_spans_kernel(const ll::Team team, const SlotSpans s) {
  const uint64_t epoch = ll::call_epoch(team);
  // Orders what this stream did before (copies, kernels) before the releases below, at system
  // scope: peers on other GPUs read the data once they see the slot.
  ll::fence_acq_rel_sys();
  for (int32_t i = 0; i < s.size; ++i)
    for (int32_t k = threadIdx.x; k < s.span[i].count; k += blockDim.x) ll::red_max_release_sys(s.span[i].first + k, epoch);
}

template <int = 0>
__global__ void __launch_bounds__(kStreamSignalThreads)
    wait_slots_kernel(const ll::Team team, const uint64_t* signals, int32_t n, int32_t skip, const uint64_t* at_least) {
  const uint64_t value = at_least != nullptr ? ll::ld_relaxed_gpu(at_least) : ll::call_epoch(team);
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x)
    if (i != skip)
      ll::signal_wait_until<ll::Scope::sys>(team, signals + i, ll::Cmp::ge, value, ll::WaitSite{i, "rank_wait"});
}

inline void stream_notify(cudaStream_t stream, const ll::Team& team, const std::vector<SlotSpan>& spans) {
  for (size_t first = 0; first < spans.size(); first += kMaxSpansPerNotify) {
    SlotSpans s{};
    for (size_t i = first; i < spans.size() && s.size < kMaxSpansPerNotify; ++i)
      if (spans[i].count > 0) s.span[s.size++] = spans[i];
    if (s.size == 0) continue;
    notify_spans_kernel<<<1, kStreamSignalThreads, 0, stream>>>(team, s);
    TL_CUDA_CHECK(cudaGetLastError());
  }
}

// at_least: a device word holding the value to wait for (e.g. the epoch of an earlier call, kept
// on the device so that replays of a graph see their own); nullptr: the current call's epoch.
inline void stream_wait(cudaStream_t stream, const ll::Team& team, const uint64_t* signals, int32_t n, int32_t skip,
                        const uint64_t* at_least = nullptr) {
  if (n <= 0) return;
  wait_slots_kernel<<<1, kStreamSignalThreads, 0, stream>>>(team, signals, n, skip, at_least);
  TL_CUDA_CHECK(cudaGetLastError());
}

#endif  // __CUDACC__

}  // namespace tilelink::tile
