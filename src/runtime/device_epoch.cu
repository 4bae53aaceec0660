// The device epoch: see device_epoch.hpp and ll::call_epoch.
#include "device_epoch.hpp"

#include "tilelink/ll/kernel_call.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/core/error.hpp"

namespace tilelink::detail {
namespace {

// The previous call's kernels on this stream have finished (stream order), and the next ones
// start after this one: a plain store needs no atomics or fences.
__global__ void advance_epoch_kernel(const ll::Team team) {
  *const_cast<uint64_t*>(team.epoch_word) = ll::next_device_epoch(team);
}

__global__ void refused_call_abort_kernel(const ll::Team team, bool advance) {
  uint64_t* word = const_cast<uint64_t*>(team.epoch_word);
  if (advance) *word = ll::next_device_epoch(team);
  ll::detail::announce_abort(team, *word, ll::kAbortRefused);
}

}  // namespace

void enqueue_refused_call_abort(const ll::Team& team, bool advance, cudaStream_t stream) {
  refused_call_abort_kernel<<<1, 1, 0, stream>>>(team, advance);
  TL_CUDA_CHECK(cudaGetLastError());
}

void enqueue_epoch_advance(const ll::Team& team, cudaStream_t stream) {
  advance_epoch_kernel<<<1, 1, 0, stream>>>(team);
  TL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tilelink::detail
