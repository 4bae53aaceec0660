// allgather_ll on in-process worlds of 1 to 8 ranks on the visible GPUs: every rank's random bytes
// (a pure function of seed, rank and case, so the expected output is built on the host) must land
// bitwise in every rank's output, which is poisoned first. Sizes from one granule to the protocol's
// 1 MiB design point, odd granule counts included; then 64 calls of random sizes back to back with
// no synchronisation between them (the receive buffers alternate by epoch parity and grow midway),
// every call's output checked afterwards; then bad arguments, refused before anything runs.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/ops/allgather_ll/allgather_ll.hpp"

namespace tt = tilelink::test;
using tilelink::Context;

namespace {

class AllgatherLl : public tt::WorldSizeTest {};

std::vector<uint8_t> expected_output(uint64_t seed, int w, int64_t bytes, uint64_t call) {
  std::vector<uint8_t> all;
  for (int r = 0; r < w; ++r) {
    const auto part = tt::random_bytes(size_t(bytes), tt::mix_seed(seed, r, call));
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

TEST_P(AllgatherLl, EveryRanksBytesLandBitwise) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int w = ranks();
  const std::vector<int64_t> sizes = {8, 24, 1000, 4096, 65528, 65536, 1 << 20};
  world().run([&](Context& ctx) {
    const int r = ctx.rank();
    void *in = nullptr, *out = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&in, sizes.back()));
    TL_CUDA_CHECK(cudaMalloc(&out, sizes.back() * w));
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t bytes = sizes[i];
      for (int rep = 0; rep < 3; ++rep) {
        const uint64_t call = i * 16 + rep;
        tt::fill_random_device(in, size_t(bytes), tt::mix_seed(seed, r, call), ctx.stream());
        tt::poison_device(out, size_t(bytes * w), 0xa5, ctx.stream());
        tilelink::allgather_ll(ctx, {in, out, bytes});
        ctx.synchronize("allgather_ll");
        const auto got = tt::download(out, size_t(bytes * w), ctx.stream());
        EXPECT_TRUE(tt::bytes_equal(expected_output(seed, w, bytes, call).data(), got.data(), got.size(),
                                    "allgather_ll " + std::to_string(bytes) + " bytes, rank " + std::to_string(r)));
      }
    }
    TL_CUDA_CHECK(cudaFree(in));
    TL_CUDA_CHECK(cudaFree(out));
  });
}

TEST_P(AllgatherLl, BackToBackCallsOfRandomSizes) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int w = ranks();
  // The same sizes on every rank (same generator and seed); the largest comes midway, so the
  // buffers grow between calls.
  std::mt19937_64 rng(seed);
  std::vector<int64_t> sizes(64);
  for (auto& s : sizes) s = 8 * int64_t(1 + rng() % 4096);
  sizes[32] = 8 * 32768;
  int64_t total = 0;
  for (auto s : sizes) total += s;
  world().run([&](Context& ctx) {
    const int r = ctx.rank();
    char *in = nullptr, *out = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&in, size_t(total)));
    TL_CUDA_CHECK(cudaMalloc(&out, size_t(total * w)));
    tt::poison_device(out, size_t(total * w), 0x5a, ctx.stream());
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      tt::fill_random_device(in + offset, size_t(sizes[i]), tt::mix_seed(seed, r, i), ctx.stream());
      tilelink::allgather_ll(ctx, {in + offset, out + offset * w, sizes[i]});
      offset += sizes[i];
    }
    ctx.synchronize("allgather_ll");
    const auto got = tt::download(out, size_t(total * w), ctx.stream());
    offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto want = expected_output(seed, w, sizes[i], i);
      EXPECT_TRUE(tt::bytes_equal(want.data(), got.data() + offset * w, want.size(),
                                  "call " + std::to_string(i) + " (" + std::to_string(sizes[i]) + " bytes), rank " +
                                      std::to_string(r)));
      offset += sizes[i];
    }
    TL_CUDA_CHECK(cudaFree(in));
    TL_CUDA_CHECK(cudaFree(out));
  });
}

TEST_P(AllgatherLl, BadArgumentsAreRefusedBeforeLaunch) {
  world().run([&](Context& ctx) {
    void* buf = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&buf, 1 << 16));
    auto refused = [&](tilelink::AllgatherLlArgs a, const char* what) {
      tt::expect_refused([&] { tilelink::allgather_ll(ctx, a); }, "allgather_ll", what);
    };
    refused({buf, buf, 12}, "bytes not a multiple of 8");
    refused({buf, buf, 0}, "no bytes");
    refused({nullptr, buf, 64}, "null input");
    refused({static_cast<char*>(buf) + 4, buf, 64}, "misaligned input");
    refused({buf, buf, tilelink::kAllgatherLlMaxBytes + 8}, "over the limit");
    ctx.synchronize("allgather_ll");
    TL_CUDA_CHECK(cudaFree(buf));
  });
}

TILELINK_WORLD_SIZES(AllgatherLl);

}  // namespace
