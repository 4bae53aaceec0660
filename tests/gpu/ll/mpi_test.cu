// The low-level primitives across processes: MpiWorld under `mpirun -np 2`, both processes on
// the same GPU (peer heaps mapped through CUDA IPC). Run through run_mpi_test.sh, which starts
// MPS so the two processes' kernels run concurrently (without it every cross-process round trip
// waits for a time slice, ~4.5 ms).
//
// Every rank runs every test in the same order and makes the same host-collective calls; tests
// use non-fatal EXPECTs so a failure on one rank cannot leave the other in a host barrier.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/ll.cuh"

namespace ll = tilelink::ll;
namespace tt = tilelink::test;
using tilelink::Context;

namespace {

Context* g_ctx = nullptr;

// ---- put / get ---------------------------------------------------------------------------------
__global__ void put_get_kernel(ll::Team t, int mode, char* dst, const char* src, size_t bytes, int peer) {
  extern __shared__ __align__(128) char smem[];
  switch (mode) {
    case 0: ll::putmem_block(t, dst, src, bytes, peer); break;
    case 1: ll::getmem_block(t, dst, src, bytes, peer); break;
    case 2: if (threadIdx.x < 32) ll::putmem_nbi_warp(t, dst, src, bytes, peer); ll::quiet(); break;
    case 3: ll::putmem_tma_block(t, dst, src, bytes, peer, smem, 16384 + 128); break;
    case 4: ll::getmem_tma_block(t, dst, src, bytes, peer, smem, 16384 + 128); break;
  }
}
const char* kModeNames[] = {"putmem_block", "getmem_block", "putmem_nbi_warp", "putmem_tma_block", "getmem_tma_block"};

TEST(LlMpi, PutAndGetAcrossProcesses) {
  Context& ctx = *g_ctx;
  ASSERT_EQ(cudaFuncSetAttribute(put_get_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 16384 + 128), cudaSuccess);
  const int me = ctx.rank(), n = ctx.num_ranks(), next = (me + 1) % n, prev = (me + n - 1) % n;
  const uint64_t seed = tt::shared_fresh_seed(ctx);  // everyone uses rank 0's seed
  SCOPED_TRACE(tt::seed_trace(seed));
  constexpr size_t kMax = (1u << 20) + 3 + 16;
  auto* src = static_cast<char*>(ctx.symmetric_workspace("ll.mpi.src", kMax));
  auto* dst = static_cast<char*>(ctx.symmetric_workspace("ll.mpi.dst", kMax));
  uint64_t case_id = 0;
  for (int mode = 0; mode < 5; ++mode)
    for (size_t bytes : {size_t(1), size_t(17), size_t(4096 + 5), size_t((1u << 20) + 3)})
      for (size_t off : {size_t(0), size_t(5)}) {
        ++case_id;
        const bool put = mode == 0 || mode == 2 || mode == 3;
        const int writer = put ? prev : next;
        tt::fill_random_device(src + off, bytes, tt::mix_seed(seed, me, case_id), ctx.stream());
        tt::poison_device(dst, bytes + 32, 0xA5, ctx.stream());
        cudaStreamSynchronize(ctx.stream());
        ctx.barrier();
        ctx.begin_op("ll_mpi_put_get");
        put_get_kernel<<<1, 128, 16384 + 128, ctx.stream()>>>(ctx.team(), mode, dst + off, src + off, bytes, next);
        tt::check_launch("put_get_kernel");
        ctx.synchronize("ll_mpi_put_get");
        ctx.barrier();
        auto want = tt::random_bytes(bytes, tt::mix_seed(seed, writer, case_id));
        const auto got = tt::download(dst, bytes + 32, ctx.stream());
        std::vector<uint8_t> expected(bytes + 32, 0xA5);
        std::copy(want.begin(), want.end(), expected.begin() + off);
        std::ostringstream what;
        what << kModeNames[mode] << " rank " << me << " bytes " << bytes << " offset " << off;
        EXPECT_TRUE(tt::bytes_equal(expected.data(), got.data(), expected.size(), what.str()));
      }
}

// ---- signals: ping-pong and putmem_signal -----------------------------------------------------
__global__ void ping_pong_kernel(ll::Team t, uint64_t* slot, uint32_t rounds, uint64_t* ns) {
  if (threadIdx.x != 0) return;
  const uint64_t base = t.epoch << 24;
  const int peer = 1 - t.rank;
  const uint64_t t0 = ll::globaltimer();
  for (uint32_t i = 1; i <= rounds; ++i) {
    if (t.rank == 0) {
      ll::signal_op(t, slot, base + i, ll::SignalOp::set, peer);
      ll::signal_wait_until(t, slot, ll::Cmp::ge, base + i, {int64_t(i), "mpi_ping_pong"});
    } else {
      ll::signal_wait_until(t, slot, ll::Cmp::ge, base + i, {int64_t(i), "mpi_ping_pong"});
      ll::signal_op(t, slot, base + i, ll::SignalOp::set, peer);
    }
  }
  *ns = ll::globaltimer() - t0;
}

TEST(LlMpi, SignalPingPongAcrossProcesses) {
  Context& ctx = *g_ctx;
  if (ctx.num_ranks() != 2) GTEST_SKIP() << "ping-pong needs exactly 2 ranks";
  uint64_t* slot = ctx.signal_workspace("ll.mpi.ping_pong", 1);
  auto* ns = static_cast<uint64_t*>(ctx.symmetric_workspace("ll.mpi.ping_pong.ns", 64));
  constexpr uint32_t kRounds = 2000;
  ctx.barrier();
  ctx.begin_op("ll_mpi_ping_pong");
  ping_pong_kernel<<<1, 32, 0, ctx.stream()>>>(ctx.team(), slot, kRounds, ns);
  tt::check_launch("ping_pong_kernel");
  ctx.synchronize("ll_mpi_ping_pong");
  ctx.barrier();
  const uint64_t epoch = ctx.epoch();
  EXPECT_EQ(tt::download_n(slot, 1, ctx.stream())[0], (epoch << 24) + kRounds);
  if (ctx.rank() == 0)
    std::printf("cross-process signal round trip: %.2f us (mean of %u; ~4500 us means MPS is not running)\n",
                tt::download_n(ns, 1, ctx.stream())[0] / 1000.0 / kRounds, kRounds);
}

__global__ void put_signal_kernel(ll::Team t, char* dst, const char* src, size_t bytes, uint64_t* sig, char* observed) {
  const int peer = (t.rank + 1) % t.num_ranks;
  if (blockIdx.x == 0) {
    ll::putmem_signal_block(t, dst, src, bytes, sig, t.epoch, ll::SignalOp::set, peer);
  } else {
    if (threadIdx.x == 0) ll::signal_wait_until(t, sig, ll::Cmp::ge, t.epoch, {-1, "mpi_put_signal"});
    __syncthreads();
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) observed[i] = dst[i];
  }
}

TEST(LlMpi, PutmemSignalAcrossProcesses) {
  Context& ctx = *g_ctx;
  const int me = ctx.rank(), n = ctx.num_ranks(), prev = (me + n - 1) % n;
  const uint64_t seed = tt::shared_fresh_seed(ctx);
  constexpr size_t kBytes = 256 * 1024 + 7;
  auto* src = static_cast<char*>(ctx.symmetric_workspace("ll.mpi.src", kBytes));
  auto* dst = static_cast<char*>(ctx.symmetric_workspace("ll.mpi.dst", kBytes));
  auto* observed = static_cast<char*>(ctx.symmetric_workspace("ll.mpi.observed", kBytes));
  uint64_t* sig = ctx.signal_workspace("ll.mpi.put_signal", 1);
  for (int call = 0; call < 20; ++call) {
    tt::fill_random_device(src, kBytes, tt::mix_seed(seed, me, call), ctx.stream());
    tt::poison_device(dst, kBytes, 0xA5, ctx.stream());
    tt::poison_device(observed, kBytes, 0x5A, ctx.stream());
    cudaStreamSynchronize(ctx.stream());
    ctx.barrier();
    ctx.begin_op("ll_mpi_put_signal");
    put_signal_kernel<<<2, 256, 0, ctx.stream()>>>(ctx.team(), dst, src, kBytes, sig, observed);
    tt::check_launch("put_signal_kernel");
    ctx.synchronize("ll_mpi_put_signal");
    ctx.barrier();
    const auto want = tt::random_bytes(kBytes, tt::mix_seed(seed, prev, call));
    const auto seen = tt::download(observed, kBytes, ctx.stream());
    EXPECT_TRUE(tt::bytes_equal(want.data(), seen.data(), kBytes,
                                "rank " + std::to_string(me) + " call " + std::to_string(call) +
                                    ": data read right after acquiring the signal"));
  }
}

// ---- barrier_all --------------------------------------------------------------------------------
__global__ void barrier_kernel(ll::Team t, uint32_t iters, uint32_t parity, uint64_t* data, uint32_t* errors) {
  const int n = t.num_ranks;
  for (uint32_t it = 0; it < iters; ++it) {
    uint64_t* buf = data + ((it + parity) & 1) * ll::kMaxLocalRanks;
    const uint64_t tok = (t.epoch << 32) | (uint64_t(it) << 8);
    if (threadIdx.x >= 64 && threadIdx.x < 64u + n) ll::put_value(t, &buf[t.rank], tok | t.rank, int(threadIdx.x - 64));
    ll::barrier_all_block(t);
    if (threadIdx.x >= 96 && threadIdx.x < 96u + n && buf[threadIdx.x - 96] != (tok | (threadIdx.x - 96)))
      atomicAdd(errors, 1u);
    if (it % 7 == 6) ll::sync_all_block(t);
  }
}

TEST(LlMpi, BarrierAllAcrossProcesses) {
  Context& ctx = *g_ctx;
  auto* data = static_cast<uint64_t*>(ctx.symmetric_workspace("ll.mpi.barrier.data", 2 * ll::kMaxLocalRanks * 8));
  auto* errors = static_cast<uint32_t*>(ctx.symmetric_workspace("ll.mpi.barrier.errors", 64));
  tt::poison_device(errors, 4, 0, ctx.stream());
  cudaStreamSynchronize(ctx.stream());
  ctx.barrier();
  // 1000 barriers in one kernel, then 200 calls of one barrier each (epochs, no reset).
  ctx.begin_op("ll_mpi_barrier");
  barrier_kernel<<<1, 128, 0, ctx.stream()>>>(ctx.team(), 1000, 0, data, errors);
  tt::check_launch("barrier_kernel");
  ctx.synchronize("ll_mpi_barrier");
  for (int call = 0; call < 200; ++call) {
    // The 1000-round kernel used buffer 1 last; consecutive barriers must alternate buffers.
    ctx.begin_op("ll_mpi_barrier");
    barrier_kernel<<<1, 128, 0, ctx.stream()>>>(ctx.team(), 1, uint32_t(call & 1), data, errors);
    tt::check_launch("barrier_kernel");
  }
  ctx.synchronize("ll_mpi_barrier");
  ctx.barrier();
  EXPECT_EQ(tt::download_n(errors, 1, ctx.stream())[0], 0u) << "rank " << ctx.rank();
  const auto slots = tt::download_n(ctx.team().barrier_slots, size_t(ctx.num_ranks()), ctx.stream());
  for (int r = 1; r < ctx.num_ranks(); ++r) EXPECT_EQ(slots[r], slots[0]) << "rank " << ctx.rank() << " slot " << r;
}

}  // namespace

int main(int argc, char** argv) { return tt::run_tests_in_mpi_world(argc, argv, "ll_mpi_test", &g_ctx); }
