// The NVSHMEM backend's kernels of `tilelink-bench primitives` (primitives_nvshmem.hpp).
#include "primitives_nvshmem.hpp"

#include "tilelink/ll/nvshmem.cuh"
#include "tilelink/ll/signal.cuh"
#include "tilelink/ll/timer.cuh"

namespace tilelink::bench::nvshmem {

namespace {

__global__ void ping_pong_kernel(const ll::Team t, uint64_t* slot, uint64_t base, uint32_t rounds, uint32_t samples,
                                 uint64_t* stamps) {
  if (threadIdx.x != 0 || t.rank > 1) return;
  const int peer = 1 - t.rank;
  for (uint32_t s = 0; s < samples; ++s) {
    if (t.rank == 0) stamps[s] = ll::globaltimer();
    for (uint32_t i = 1; i <= rounds; ++i) {
      const uint64_t k = uint64_t(s) * rounds + i;
      if (t.rank == 0) {
        nvshmemx_signal_op(slot, base + k, NVSHMEM_SIGNAL_SET, peer);
        ll::signal_wait_until<ll::Scope::sys>(t, slot, ll::Cmp::ge, base + k, {int64_t(k), "bench_nvshmem_ping_pong"});
      } else {
        ll::signal_wait_until<ll::Scope::sys>(t, slot, ll::Cmp::ge, base + k, {int64_t(k), "bench_nvshmem_ping_pong"});
        nvshmemx_signal_op(slot, base + k, NVSHMEM_SIGNAL_SET, peer);
      }
    }
  }
  if (t.rank == 0) stamps[samples] = ll::globaltimer();
}

__global__ void put_kernel(const ll::Team t, char* dst, const char* src, size_t bytes, uint64_t* sig, uint64_t value,
                           int peer) {
  const size_t per = ((bytes + gridDim.x - 1) / gridDim.x + 15) & ~size_t(15);
  const size_t lo = min(bytes, per * blockIdx.x), hi = min(bytes, lo + per);
  if (hi > lo)
    ll::putmem_signal_nbi<ll::PutScope::block>(ll::nvshmem, t, dst + lo, src + lo, hi - lo, sig, value, peer);
  __syncthreads();
  if (threadIdx.x == 0) ll::quiet(ll::nvshmem);
}

}  // namespace

int attach() { return ll::attach_nvshmem_device_state(); }

cudaError_t ping_pong(const ll::Team& team, uint64_t* slot, uint64_t base, uint32_t rounds, uint32_t samples,
                      uint64_t* stamps, cudaStream_t stream) {
  ping_pong_kernel<<<1, 32, 0, stream>>>(team, slot, base, rounds, samples, stamps);
  return cudaGetLastError();
}

cudaError_t put(const ll::Team& team, int blocks, char* dst, const char* src, size_t bytes, uint64_t* sig,
                uint64_t value, int peer, cudaStream_t stream) {
  put_kernel<<<blocks, 512, 0, stream>>>(team, dst, src, bytes, sig, value, peer);
  return cudaGetLastError();
}

}  // namespace tilelink::bench::nvshmem
