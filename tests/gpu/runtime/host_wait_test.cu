// Host waits are bounded where something unbounded may be in the stream: once a context has an
// NCCL communicator, waiting for its stream gives up after the host timeout, aborts the
// communicator and throws; the next NCCL call works on a new one. Without NCCL a long kernel is
// waited for (tilelink's own kernels bound their waits themselves). A world of one rank: a
// collective that hangs needs a peer that never comes, which one GPU cannot host (NCCL refuses
// two ranks on one GPU), so a kernel that runs past the timeout stands in for it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/runtime/nccl.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kHostTimeoutMs = 400;

__global__ void spin_kernel(uint64_t ns) {
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

tilelink::WorldOptions options() {
  tilelink::WorldOptions o;
  o.heap_bytes = size_t(16) << 20;
  o.barrier_timeout_ms = kHostTimeoutMs;
  return o;
}

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

TEST(HostWait, WithoutNcclALongKernelIsWaitedFor) {
  tilelink::test::release_worlds();
  tilelink::InProcessWorld world(1, options());
  world.run([](tilelink::Context& ctx) {
    spin_kernel<<<1, 1, 0, ctx.stream()>>>(3 * kHostTimeoutMs * 1000000ull / 2);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const auto t0 = Clock::now();
    ctx.synchronize("spin");  // must not throw
    EXPECT_GE(ms_since(t0), int64_t(kHostTimeoutMs));
  });
}

TEST(HostWait, WithNcclInFlightTheWaitEndsAtTheHostTimeoutAndNcclWorksAgain) {
  tilelink::test::release_worlds();
  tilelink::InProcessWorld world(1, options());
  world.run([](tilelink::Context& ctx) {
    ASSERT_NE(tilelink::nccl_comm(ctx), nullptr);
    ASSERT_TRUE(tilelink::detail::nccl_comm_made(ctx));
    spin_kernel<<<1, 1, 0, ctx.stream()>>>(4 * kHostTimeoutMs * 1000000ull);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    std::string error;
    try {
      ctx.synchronize("spin");
    } catch (const tilelink::Error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find("spin: the stream did not finish within " + std::to_string(kHostTimeoutMs) + " ms"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("communicator was aborted"), std::string::npos) << error;
    EXPECT_FALSE(tilelink::detail::nccl_comm_made(ctx)) << "the aborted communicator is still the context's";

    // A new communicator, and a collective on it: the all-reduce of one rank is its input.
    constexpr size_t kCount = 4096;
    std::vector<float> host(kCount);
    for (size_t i = 0; i < kCount; ++i) host[i] = float(tilelink::test::random_word(0x5eed, i) % 1000) - 500.f;
    float *in = nullptr, *out = nullptr;
    ASSERT_EQ(cudaMalloc(&in, kCount * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out, kCount * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(in, host.data(), kCount * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(out, 0xff, kCount * 4), cudaSuccess);  // NaN
    tilelink::nccl_check(ncclAllReduce(in, out, kCount, ncclFloat32, ncclSum, tilelink::nccl_comm(ctx), ctx.stream()),
                         ctx, "ncclAllReduce");
    ctx.synchronize("all-reduce on the new communicator");
    std::vector<float> got(kCount);
    ASSERT_EQ(cudaMemcpy(got.data(), out, kCount * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, host);
    cudaFree(in);
    cudaFree(out);
  });
}

}  // namespace
