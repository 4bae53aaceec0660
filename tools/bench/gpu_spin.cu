// tilelink-bench: a one-thread kernel that keeps the stream busy for a while, launched before a
// timed sample's start event, so the host enqueues the sample's calls while the GPU is busy and
// the events time GPU work only — not the host's launch latency (the same method as the PyTorch
// baselines' torch.cuda._sleep, bench/torch_baselines.py).
#include "bench/gpu_spin.hpp"
#include "tilelink/ll/timer.cuh"
#include "tilelink/core/error.hpp"

namespace tilelink::bench {
namespace {
__global__ void spin_kernel(uint64_t nanoseconds) {
  const uint64_t start = ll::globaltimer();
  while (ll::globaltimer() - start < nanoseconds) {
  }
}
}  // namespace

void gpu_spin(cudaStream_t stream, int microseconds) {
  spin_kernel<<<1, 1, 0, stream>>>(uint64_t(microseconds) * 1000);
  TL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tilelink::bench
