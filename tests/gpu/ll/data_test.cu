// putmem / getmem at thread, warp and block scope (blocking and _nbi), putmem_signal, and the TMA
// block copies, across ranks of in-process worlds of 1, 2, 4 and 8 ranks on one GPU. Every case
// uses fresh random data, poisons the destination (the bytes to be written with the complement
// of what must land there, guard bytes around them with random poison) and checks the whole
// region bitwise, so a missing, misplaced or overlong write fails.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/ll.cuh"
#include "tilelink/tile/rank_copy.hpp"
#include "tilelink/tile/signal.cuh"
#include "tilelink/tile/stream_signal.cuh"

namespace ll = tilelink::ll;
namespace tt = tilelink::test;
using tilelink::Context;

namespace {

enum class Variant : int { thread, thread_nbi, warp, warp_nbi, block, block_nbi };
constexpr Variant kVariants[] = {Variant::thread, Variant::thread_nbi, Variant::warp,
                                 Variant::warp_nbi, Variant::block, Variant::block_nbi};
const char* variant_name(Variant v) {
  switch (v) {
    case Variant::thread: return "thread";
    case Variant::thread_nbi: return "thread_nbi";
    case Variant::warp: return "warp";
    case Variant::warp_nbi: return "warp_nbi";
    case Variant::block: return "block";
    case Variant::block_nbi: return "block_nbi";
  }
  return "?";
}

constexpr size_t kSizes[] = {1, 3, 16, 17, 4096 + 5, (1u << 20) + 3};
// (src offset, dst offset) from 16-byte aligned bases: same residue mod 16, mod 8, mod 4, mod 1.
constexpr std::pair<size_t, size_t> kOffsets[] = {{0, 0}, {5, 5}, {3, 11}, {2, 6}, {1, 0}};
constexpr size_t kGuard = 64;                         // checked bytes before and after the window
constexpr size_t kMaxBytes = (1u << 20) + 3;
constexpr size_t kRegion = 2 * kGuard + 16 + kMaxBytes;  // destination region per rank
constexpr unsigned kThreads = 96;                     // 3 warps: a non-power-of-two split

// One call of the primitive under test. The warp forms run on warp 1 (lanes are not threadIdx.x).
__global__ void copy_kernel(ll::Team t, bool put, Variant v, char* dst, const char* src, size_t bytes,
                            int peer) {
  const bool first_thread = threadIdx.x == 0;
  const bool warp1 = threadIdx.x / 32 == 1;
  switch (v) {
    case Variant::thread:
      if (first_thread) put ? ll::putmem(t, dst, src, bytes, peer) : ll::getmem(t, dst, src, bytes, peer);
      break;
    case Variant::thread_nbi:
      if (first_thread) {
        put ? ll::putmem_nbi(t, dst, src, bytes, peer) : ll::getmem_nbi(t, dst, src, bytes, peer);
        ll::quiet();
      }
      break;
    case Variant::warp:
      if (warp1) put ? ll::putmem_warp(t, dst, src, bytes, peer) : ll::getmem_warp(t, dst, src, bytes, peer);
      break;
    case Variant::warp_nbi:
      if (warp1) {
        put ? ll::putmem_nbi_warp(t, dst, src, bytes, peer) : ll::getmem_nbi_warp(t, dst, src, bytes, peer);
        ll::quiet();
      }
      break;
    case Variant::block:
      put ? ll::putmem_block(t, dst, src, bytes, peer) : ll::getmem_block(t, dst, src, bytes, peer);
      break;
    case Variant::block_nbi:
      put ? ll::putmem_nbi_block(t, dst, src, bytes, peer) : ll::getmem_nbi_block(t, dst, src, bytes, peer);
      ll::quiet();
      break;
  }
}

// TMA block copy; `blocks` blocks split [0, bytes) at arbitrary (not 16-aligned) boundaries.
__global__ void tma_kernel(ll::Team t, bool put, char* dst, const char* src, size_t bytes, int peer,
                           uint32_t smem_skew, uint32_t smem_bytes) {
  extern __shared__ __align__(128) char smem[];
  const size_t begin = bytes * blockIdx.x / gridDim.x, end = bytes * (blockIdx.x + 1) / gridDim.x;
  char* stage = smem + smem_skew;
  if (put) ll::putmem_tma_block(t, dst + begin, src + begin, end - begin, peer, stage, smem_bytes);
  else ll::getmem_tma_block(t, dst + begin, src + begin, end - begin, peer, stage, smem_bytes);
}

// Block 0 sends `bytes` to `to` with putmem_signal* (variant), block 1 waits for the signal from
// `from` and copies what arrived into `observed` right after the acquire: a signal that overtook
// its data shows up as poison there.
enum class SignalVariant : int { thread, warp, block, tma_block };
constexpr SignalVariant kSignalVariants[] = {SignalVariant::thread, SignalVariant::warp,
                                             SignalVariant::block, SignalVariant::tma_block};
const char* signal_variant_name(SignalVariant v) {
  switch (v) {
    case SignalVariant::thread: return "putmem_signal";
    case SignalVariant::warp: return "putmem_signal_warp";
    case SignalVariant::block: return "putmem_signal_block";
    case SignalVariant::tma_block: return "putmem_signal_tma_block";
  }
  return "?";
}

__global__ void put_signal_kernel(ll::Team t, SignalVariant v, ll::SignalOp op, uint64_t value,
                                  uint64_t wait_for, char* dst, const char* src, size_t bytes,
                                  uint64_t* sig, char* observed, int to) {
  extern __shared__ __align__(128) char smem[];
  if (blockIdx.x == 0) {
    // Let the receiver start waiting first, most of the time.
    const uint64_t t0 = ll::globaltimer();
    while (ll::globaltimer() - t0 < 20000) {
    }
    switch (v) {
      case SignalVariant::thread:
        if (threadIdx.x == 0) ll::putmem_signal(t, dst, src, bytes, sig, value, op, to);
        break;
      case SignalVariant::warp:
        if (threadIdx.x / 32 == 1) ll::putmem_signal_warp(t, dst, src, bytes, sig, value, op, to);
        break;
      case SignalVariant::block:
        ll::putmem_signal_block(t, dst, src, bytes, sig, value, op, to);
        break;
      case SignalVariant::tma_block:
        ll::putmem_signal_tma_block(t, dst, src, bytes, sig, value, op, to, smem, 16384 + 128);
        break;
    }
  } else {
    if (threadIdx.x == 0) ll::signal_wait_until(t, sig, ll::Cmp::ge, wait_for, {int64_t(bytes), "put_signal_test"});
    __syncthreads();
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) observed[i] = dst[i];
  }
}

std::string describe(bool put, Variant v, int rank, size_t bytes, size_t src_off, size_t dst_off) {
  std::ostringstream os;
  os << (put ? "putmem " : "getmem ") << variant_name(v) << " rank " << rank << " bytes " << bytes
     << " src_off " << src_off << " dst_off " << dst_off;
  return os.str();
}

// Host side of one copy case on one rank. The data that lands in this rank's window comes from
// rank `writer` (its source bytes are the pattern of writer_seed).
struct Buffers {
  char* src;       // symmetric, kMaxBytes + 32
  char* dst;       // symmetric, kRegion
};

Buffers buffers(Context& ctx) {
  return {static_cast<char*>(ctx.symmetric_workspace("ll.test.data.src", kMaxBytes + 32)),
          static_cast<char*>(ctx.symmetric_workspace("ll.test.data.dst", kRegion))};
}

// Poisons this rank's destination region for a window [kGuard + dst_off, + bytes) that must end
// up holding `data`; returns the expected region.
std::vector<uint8_t> poison_region(Context& ctx, char* dst, const std::vector<uint8_t>& data, size_t dst_off,
                                   uint64_t poison_seed) {
  const size_t region = 2 * kGuard + 16 + data.size();
  std::vector<uint8_t> poison = tt::random_bytes(region, poison_seed);
  std::vector<uint8_t> expected = poison;
  for (size_t i = 0; i < data.size(); ++i) {
    poison[kGuard + dst_off + i] = uint8_t(~data[i]);
    expected[kGuard + dst_off + i] = data[i];
  }
  tt::upload(dst, poison.data(), region, ctx.stream());
  return expected;
}

void run_copy_cases(tilelink::InProcessWorld& world, bool put) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  world.run([&](Context& ctx) {
    SCOPED_TRACE(tt::seed_trace(seed));  // per thread: rank threads report their own failures
    const int me = ctx.rank(), n = ctx.num_ranks();
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    const Buffers b = buffers(ctx);
    uint64_t case_id = 0;
    for (size_t bytes : kSizes)
      for (auto [src_off, dst_off] : kOffsets)
        for (Variant v : kVariants) {
          ++case_id;
          // put: I write my source into `next`'s window; my window gets `prev`'s source.
          // get: I read `next`'s source into my window.
          const int writer = put ? prev : next;
          const uint64_t my_seed = tt::mix_seed(seed, me, case_id);
          const auto data = tt::random_bytes(bytes, tt::mix_seed(seed, writer, case_id));
          tt::fill_random_device(b.src + 16 + src_off, bytes, my_seed, ctx.stream());
          const auto expected = poison_region(ctx, b.dst, data, dst_off, tt::mix_seed(seed, 1000 + me, case_id));
          ctx.barrier();  // every window poisoned, every source filled
          ctx.begin_op("ll_data_test");
          copy_kernel<<<1, kThreads, 0, ctx.stream()>>>(ctx.team(), put, v, b.dst + kGuard + dst_off,
                                                       b.src + 16 + src_off, bytes, next);
          tt::check_launch("copy_kernel");
          ctx.synchronize("ll_data_test");
          ctx.barrier();  // every copy finished
          const auto got = tt::download(b.dst, expected.size(), ctx.stream());
          const std::string what = describe(put, v, me, bytes, src_off, dst_off);
          EXPECT_TRUE(tt::bytes_equal(expected.data(), got.data(), expected.size(), what));
        }
  });
}

class LlData : public tt::WorldSizeTest {};

TEST_P(LlData, PutmemEveryScopeSizeAndAlignment) { run_copy_cases(world(), /*put=*/true); }
TEST_P(LlData, GetmemEveryScopeSizeAndAlignment) { run_copy_cases(world(), /*put=*/false); }

TEST_P(LlData, TmaPutAndGet) {
  constexpr uint32_t kMaxSmem = 65536 + 128 + 16;
  // The attribute is per device: ranks run on every visible GPU (seen failing on a 2-GPU machine
  // when it was set for the current device only).
  int devices = 0, current = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  for (int d = 0; d < devices; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    ASSERT_EQ(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMaxSmem)),
              cudaSuccess);
  }
  ASSERT_EQ(cudaSetDevice(current), cudaSuccess);
  struct Smem {
    uint32_t skew, bytes;
  };
  // 4 stages of 16 KiB; 2 stages of 2 KiB from a skewed (8-byte aligned) base; 1 stage of 1 KiB.
  constexpr Smem kSmem[] = {{0, 65536 + 128}, {8, 4096 + 128}, {0, 1024 + 128}};
  constexpr size_t kTmaSizes[] = {1, 3, 16, 17, 48, 4096 + 5, 256 * 1024, (1u << 20) + 3};
  constexpr std::pair<size_t, size_t> kTmaOffsets[] = {{0, 0}, {5, 5}, {16, 0}, {3, 11}};
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  world().run([&](Context& ctx) {
    SCOPED_TRACE(tt::seed_trace(seed));  // per thread: rank threads report their own failures
    const int me = ctx.rank(), n = ctx.num_ranks();
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    const Buffers b = buffers(ctx);
    const int max_blocks = std::min(3, ctx.sm_count());
    uint64_t case_id = 0;
    for (bool put : {true, false})
      for (size_t bytes : kTmaSizes)
        for (auto [src_off, dst_off] : kTmaOffsets)
          for (const Smem& sm : kSmem)
            for (int blocks : {1, max_blocks}) {
              ++case_id;
              const int writer = put ? prev : next;
              const auto data = tt::random_bytes(bytes, tt::mix_seed(seed, writer, case_id));
              tt::fill_random_device(b.src + 16 + src_off, bytes, tt::mix_seed(seed, me, case_id), ctx.stream());
              const auto expected = poison_region(ctx, b.dst, data, dst_off, tt::mix_seed(seed, 1000 + me, case_id));
              ctx.barrier();
              ctx.begin_op("ll_tma_test");
              tma_kernel<<<blocks, 128, sm.skew + sm.bytes, ctx.stream()>>>(
                  ctx.team(), put, b.dst + kGuard + dst_off, b.src + 16 + src_off, bytes, next, sm.skew, sm.bytes);
              tt::check_launch("tma_kernel");
              ctx.synchronize("ll_tma_test");
              ctx.barrier();
              const auto got = tt::download(b.dst, expected.size(), ctx.stream());
              std::ostringstream what;
              what << (put ? "putmem_tma_block" : "getmem_tma_block") << " rank " << me << " bytes " << bytes
                   << " src_off " << src_off << " dst_off " << dst_off << " smem " << sm.bytes << "+skew "
                   << sm.skew << " blocks " << blocks;
              EXPECT_TRUE(tt::bytes_equal(expected.data(), got.data(), expected.size(), what.str()));
            }
  });
}

TEST_P(LlData, PutmemSignalThenWait) {
  ASSERT_EQ(cudaFuncSetAttribute(put_signal_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 16384 + 128),
            cudaSuccess);
  constexpr size_t kSigSizes[] = {1, 17, 4096 + 5, (1u << 20) + 3};
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  world().run([&](Context& ctx) {
    SCOPED_TRACE(tt::seed_trace(seed));  // per thread: rank threads report their own failures
    const int me = ctx.rank(), n = ctx.num_ranks();
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    const Buffers b = buffers(ctx);
    char* observed = static_cast<char*>(ctx.symmetric_workspace("ll.test.data.observed", kMaxBytes + 16));
    uint64_t* sig = ctx.signal_workspace("ll.test.data.put_signal", 2);  // [0]: set, [1]: add
    uint64_t case_id = 0;
    for (ll::SignalOp op : {ll::SignalOp::set, ll::SignalOp::add})
      for (size_t bytes : kSigSizes)
        for (SignalVariant v : kSignalVariants) {
          ++case_id;
          const auto data = tt::random_bytes(bytes, tt::mix_seed(seed, prev, case_id));
          tt::fill_random_device(b.src + 16, bytes, tt::mix_seed(seed, me, case_id), ctx.stream());
          const auto expected = poison_region(ctx, b.dst, data, 0, tt::mix_seed(seed, 1000 + me, case_id));
          tt::poison_device(observed, bytes, 0xA5, ctx.stream());
          uint64_t* slot = sig + (op == ll::SignalOp::set ? 0 : 1);
          // Only `prev` touches my slot, and not before the barrier below.
          const uint64_t before = tt::download_n(slot, 1, ctx.stream())[0];
          const uint64_t epoch = ctx.begin_op("ll_put_signal_test");
          const uint64_t value = op == ll::SignalOp::set ? epoch : 1;
          const uint64_t wait_for = op == ll::SignalOp::set ? epoch : before + 1;
          ctx.barrier();
          put_signal_kernel<<<2, 96, 16384 + 128, ctx.stream()>>>(ctx.team(), v, op, value, wait_for,
                                                                   b.dst + kGuard, b.src + 16, bytes, slot,
                                                                   observed, next);
          tt::check_launch("put_signal_kernel");
          ctx.synchronize("ll_put_signal_test");
          ctx.barrier();
          std::ostringstream what;
          what << signal_variant_name(v) << (op == ll::SignalOp::set ? " (set)" : " (add)") << " rank " << me
               << " bytes " << bytes;
          const auto got = tt::download(b.dst, expected.size(), ctx.stream());
          EXPECT_TRUE(tt::bytes_equal(expected.data(), got.data(), expected.size(), what.str() + ": destination"));
          const auto seen = tt::download(observed, bytes, ctx.stream());
          EXPECT_TRUE(tt::bytes_equal(data.data(), seen.data(), bytes,
                                      what.str() + ": data read right after acquiring the signal"));
          const uint64_t after = tt::download_n(slot, 1, ctx.stream())[0];
          EXPECT_EQ(after, wait_for) << what.str() << ": final signal value";
        }
  });
}

// The stream-ordered side of the tile layer: rank_copy_data into the next rank, then its 600
// slots raised in stream order — with the host's epoch (rank_signals_set: three
// cuStreamBatchMemOp batches of <= 255), and with the device epoch of a call begun on the stream
// (stream_notify, which op calls and CUDA graphs use). The next rank waits on all 600 (bounded,
// stream_wait), then reads the data: it must be complete, every slot must hold exactly the epoch,
// and the guard slot after them must be untouched.
TEST_P(LlData, RankCopyThenStreamSignals) {
  constexpr int kSlots = 600;
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  world().run([&](Context& ctx) {
    SCOPED_TRACE(tt::seed_trace(seed));
    const int me = ctx.rank(), n = ctx.num_ranks();
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    const Buffers b = buffers(ctx);
    char* observed = static_cast<char*>(ctx.symmetric_workspace("ll.test.data.observed", kMaxBytes + 16));
    // + a guard slot each. Host and device epochs count different calls: separate slots.
    uint64_t* host_slots = ctx.signal_workspace("ll.test.data.host_epoch", kSlots + 1);
    uint64_t* device_slots = ctx.signal_workspace("ll.test.data.device_epoch", kSlots + 1);
    uint64_t case_id = 0;
    for (bool device_epoch : {false, true})
      for (size_t bytes : {size_t(4096 + 5), kMaxBytes}) {
        ++case_id;
        uint64_t* slots = device_epoch ? device_slots : host_slots;
        const auto data = tt::random_bytes(bytes, tt::mix_seed(seed, prev, case_id));
        tt::fill_random_device(b.src, bytes, tt::mix_seed(seed, me, case_id), ctx.stream());
        tt::poison_device(b.dst, bytes, 0x5A, ctx.stream());
        tt::poison_device(observed, bytes, 0xA5, ctx.stream());
        ctx.synchronize("rank copy test data");
        const char* name = device_epoch ? "ll_stream_notify_test" : "ll_rank_copy_test";
        uint64_t epoch = device_epoch ? 0 : ctx.begin_op(name);
        if (device_epoch) ctx.begin_op(name, ctx.stream());
        const tilelink::ll::Team team = ctx.team();
        ctx.barrier();  // every destination is poisoned before any rank writes it
        tilelink::tile::rank_copy_data(ctx.stream(), ctx.peer_ptr(b.dst, next), b.src, bytes);
        if (device_epoch) {
          tilelink::tile::stream_notify(ctx.stream(), team, {{ctx.peer_ptr(slots, next), kSlots}});
        } else {
          std::vector<uint64_t*> at_next(kSlots);
          for (int i = 0; i < kSlots; ++i) at_next[size_t(i)] = ctx.peer_ptr(slots + i, next);
          tilelink::tile::rank_signals_set(ctx.stream(), at_next.data(), at_next.size(), epoch);
        }
        tilelink::tile::stream_wait(ctx.stream(), team, slots, kSlots, -1);
        ASSERT_EQ(cudaMemcpyAsync(observed, b.dst, bytes, cudaMemcpyDeviceToDevice, ctx.stream()), cudaSuccess);
        ctx.synchronize(name);
        // The word the stream advanced (a one-rank world launches no advance: the host's count).
        if (device_epoch)
          epoch = team.epoch_word != nullptr ? tt::download_n(team.epoch_word, 1, ctx.stream())[0] : team.epoch;
        std::ostringstream what;
        what << name << " rank " << me << " from rank " << prev << " bytes " << bytes;
        const auto seen = tt::download(observed, bytes, ctx.stream());
        EXPECT_TRUE(tt::bytes_equal(data.data(), seen.data(), bytes, what.str() + ": data after the signals"));
        const auto values = tt::download_n(slots, kSlots + 1, ctx.stream());
        int wrong = 0;
        for (int i = 0; i < kSlots; ++i) wrong += values[size_t(i)] != epoch;
        EXPECT_EQ(wrong, 0) << what.str() << ": slots not holding epoch " << epoch;
        EXPECT_EQ(values[kSlots], 0u) << what.str() << ": guard slot written";
        ctx.barrier();  // nobody writes my slots or buffers again before I have read them
      }
  });
}

TILELINK_WORLD_SIZES(LlData);

}  // namespace
