// tilelink/ll/kernel_call.cuh — a call of one kernel that advances the device epoch itself.
//
// A call begun on a stream normally pays a tiny kernel that advances the device epoch word before
// its own kernels run (Context::begin_op(op, stream)). A call that is a single kernel can do it
// inside (Context::begin_op_in_kernel): every thread reads the call's epoch as the next epoch
// (next_device_epoch) — no block writes the word before every block is done with the call — and
// the last block to finish writes it, so the next call, in stream order, reads the new value. One
// launch per call instead of two, which latency-bound ops feel; graph replays advance it as well.
//
//   const ll::Team t = ll::kernel_call_team(team);   // every thread, first
//   ... the call, with t (waits compare with t.epoch) ...
//   ll::end_kernel_call_block(team, t.epoch, arrivals); // every thread of every block, last
//
// `arrivals` is one zeroed signal slot of the op's own (the last block sets it back to zero).
#pragma once

#include <cstdint>

#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/team.cuh"

namespace tilelink::ll {

#if defined(__CUDACC__)

// The epoch of a call begun on the device: one past the word, and at least the host's count of
// calls (t.epoch). Calls that use no signal (cuBLAS then NCCL) advance only the host's count; the
// next call begun on the device catches up with it, so every rank's word stays equal to every
// other's whichever of its calls advanced it — also when a rank that refused a call advanced its
// word where the others' path did not (Context::abandon_call). A graph replay, whose host count
// is the one of its capture, advances the word by one.
TL_DEVICE uint64_t next_device_epoch(const Team& t) {
  const uint64_t next = ld<Order::relaxed, Scope::gpu>(t.epoch_word) + 1;
  return next > t.epoch ? next : t.epoch;
}

TL_DEVICE Team kernel_call_team(const Team& t) {
  Team c = t;
  if (t.epoch_word != nullptr) {
    c.epoch = next_device_epoch(t);
    c.epoch_word = nullptr;
  }
  return c;
}

TL_DEVICE void end_kernel_call_block(const Team& t, uint64_t epoch, uint64_t* arrivals) {
  __syncthreads();
  if (threadIdx.x != 0 || t.epoch_word == nullptr) return;
  const uint64_t before = atomic_add<Order::relaxed, Scope::gpu>(arrivals, 1);
  if (before + 1 == uint64_t(gridDim.x) * gridDim.y * gridDim.z) {
    st<Order::relaxed, Scope::gpu>(arrivals, 0);
    st<Order::relaxed, Scope::gpu>(const_cast<uint64_t*>(t.epoch_word), epoch);
  }
}

#endif  // __CUDACC__

}  // namespace tilelink::ll
