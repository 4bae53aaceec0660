// The device epoch: see device_epoch.hpp and ll::call_epoch.
#include "device_epoch.hpp"

#include "tilelink/runtime/error.hpp"

namespace tilelink::detail {
namespace {

// The previous call's kernels on this stream have finished (stream order), and the next ones
// start after this one: a plain increment needs no atomics or fences.
__global__ void advance_epoch_kernel(uint64_t* word) { *word += 1; }

}  // namespace

void enqueue_epoch_advance(uint64_t* word, cudaStream_t stream) {
  advance_epoch_kernel<<<1, 1, 0, stream>>>(word);
  TL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tilelink::detail
