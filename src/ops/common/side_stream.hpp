// src/ops/common/side_stream.hpp — an op's hand-over to and from the context's side stream.
//
// fork(): the side stream waits for everything issued so far on the caller's stream (so the
// previous call's GEMM is done before its buffers are refilled); join(): the caller's stream waits
// for the side stream, so the op is complete, in stream order, when the caller's stream says so.
// The stream itself is the Context's (created with its main stream, see Context::side_stream);
// each op keeps its own pair of events.
#pragma once

#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "ops/common/nvshmem_launch.hpp"
#include "tilelink/runtime/context.hpp"
#include "tilelink/core/error.hpp"
#include "tilelink/tile/stream_signal.cuh"

namespace tilelink::ops {

class SideStream {
 public:
  explicit SideStream(Context& ctx) : stream_(ctx.side_stream()) {
    TL_CUDA_CHECK(cudaSetDevice(ctx.device()));
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming));
  }
  ~SideStream() {
    cudaEventDestroy(joined_);
    cudaEventDestroy(forked_);
  }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t get() const { return stream_; }
  void fork(cudaStream_t from) {
    TL_CUDA_CHECK(cudaEventRecord(forked_, from));
    TL_CUDA_CHECK(cudaStreamWaitEvent(stream_, forked_, 0));
  }
  void join(cudaStream_t into) {
    TL_CUDA_CHECK(cudaEventRecord(joined_, stream_));
    TL_CUDA_CHECK(cudaStreamWaitEvent(into, joined_, 0));
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t forked_ = nullptr, joined_ = nullptr;
};

// An op's signal slots are new (its first call, or a larger shape moved its workspace): they start
// at zero while the earlier calls' handshakes live in the old ones. Drains every rank's earlier
// calls (both streams, then a barrier) and records the slots; true when it drained. Collective.
inline bool drain_on_new_slots(Context& ctx, SideStream& side, cudaStream_t main, const void* slots,
                               const void*& last) {
  if (slots == last) return false;
  ctx.refuse_in_capture("move its signal slots (a larger shape than any call before)");
  ctx.wait_stream(main, "draining the earlier calls (main stream)");
  ctx.wait_stream(side.get(), "draining the earlier calls (side stream)");
  ctx.barrier();
  last = slots;
  return true;
}

// This rank's slot of a per-rank signal array (`rank_slots[me]`) on every peer, as mapped here,
// after the spans in `first`: what one stream_notify raises to tell every peer "ready" or "done"
// (with this rank's own slots that the same kernel publishes).
inline std::vector<tile::SlotSpan> my_slot_at_peers(const Context& ctx, uint64_t* rank_slots,
                                                    std::vector<tile::SlotSpan> first = {}) {
  for (int q = 0; q < ctx.num_ranks(); ++q)
    if (q != ctx.rank()) first.push_back({ctx.peer_ptr(rank_slots + ctx.rank(), q)});
  return first;
}

// On `stream`: this rank's own slots `mine` raised to the call's epoch, and "ready" (this rank's
// buffers are free for this call's pushes) at every peer — one kernel where peers are reached by
// load/store, else `mine` then the ready signals through NVSHMEM.
inline void notify_ready(const Context& ctx, cudaStream_t stream, const ll::Team& team, uint64_t* ready,
                         std::vector<tile::SlotSpan> mine = {}) {
  if (ctx.peers_load_store()) {
    tile::stream_notify(stream, team, my_slot_at_peers(ctx, ready, std::move(mine)));
    return;
  }
  if (!mine.empty()) tile::stream_notify(stream, team, mine);
  TL_CUDA_CHECK(launch_ready_notify_nvshmem(team, ready, stream));
}

}  // namespace tilelink::ops
