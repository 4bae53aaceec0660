// tests/gpu/common/gpu_test.hpp — helpers every GPU test area shares (ll, tile, gemm, ops).
//
//   Worlds:   test::world(n) is an InProcessWorld of n ranks (small heap), kept until a test asks
//             for another size (one world alive at a time: see world.cpp) or the last test
//             ends; WorldSizeTest + TILELINK_WORLD_SIZES run a test at every world size from 1
//             to 8. Rank r runs on visible GPU r % #GPUs, so the topology is part of the
//             matrix: with one GPU visible all ranks share it; with two, odd sizes share them
//             unevenly (3 ranks: two on GPU 0, one on GPU 1). Tests must hold on any of these
//             layouts (scripts/gpu_check.sh runs both visibilities).
//   Data:     fresh_seed() differs every run unless TILELINK_TEST_SEED fixes it (print it:
//             SCOPED_TRACE(seed_trace(seed))); random bytes are a pure function of (seed,
//             index), identical on host and device (random_word / random_byte, callable in a
//             kernel), so the expected result of a peer's data is computed on the host without a
//             download;
//             poison_device() before a run; bytes_equal() compares bitwise and names the first
//             mismatches.
//   MPI:      run_tests_in_mpi_world() is the main() of the multi-process tests (mpirun);
//             shared_fresh_seed() gives every rank rank 0's seed.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tilelink/runtime/context.hpp"
#include "tilelink/core/error.hpp"
#include "tilelink/ll/team.cuh"  // TL_HOST_DEVICE: host and device under nvcc, host-only from .cpp
#include "tilelink/runtime/world.hpp"

namespace tilelink::test {

// ---- worlds -----------------------------------------------------------------------------------
inline constexpr size_t kDefaultHeapMiB = 256;
inline constexpr int kWorldSizes[] = {1, 2, 3, 4, 5, 6, 7, 8};

// The cached in-process world of `ranks` ranks with a `heap_mib` MiB heap per rank. Its wait
// timeout is the environment's (TILELINK_WAIT_TIMEOUT_MS) or the runtime default.
InProcessWorld& world(int ranks, size_t heap_mib = kDefaultHeapMiB);
// Destroys the cached world (done automatically after the last test).
void release_worlds();

// Parameterised on the world size: TEST_P(MySuite, ...) { world().run(...); }
class WorldSizeTest : public ::testing::TestWithParam<int> {
 protected:
  int ranks() const { return GetParam(); }
  InProcessWorld& world(size_t heap_mib = kDefaultHeapMiB) { return test::world(GetParam(), heap_mib); }
};
std::string world_size_name(const ::testing::TestParamInfo<int>& info);

#define TILELINK_WORLD_SIZES(Suite)                                                     \
  INSTANTIATE_TEST_SUITE_P(Ranks, Suite, ::testing::ValuesIn(::tilelink::test::kWorldSizes), \
                           ::tilelink::test::world_size_name)

// Launch-error check for kernels of an op: throws tilelink::Error naming `what`.
void check_launch(const char* what);

// ---- data -------------------------------------------------------------------------------------
uint64_t fresh_seed();
std::string seed_trace(uint64_t seed);
// A seed derived from a base seed and up to three coordinates (rank, case, ...).
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);
// The random pattern, callable on host and device (kernels that generate a peer's data on the
// fly, and the host that predicts it, agree bit for bit): word w is splitmix64(seed + w), and
// byte i is byte (i % 8) of word i / 8 (little-endian).
TL_HOST_DEVICE uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
TL_HOST_DEVICE uint64_t random_word(uint64_t seed, uint64_t w) { return splitmix64(seed + w); }
TL_HOST_DEVICE uint8_t random_byte(uint64_t seed, uint64_t i) {
  return uint8_t(random_word(seed, i / 8) >> (8 * (i % 8)));
}
// Bytes [0, bytes) of the pattern.
void random_bytes(void* host, size_t bytes, uint64_t seed);
std::vector<uint8_t> random_bytes(size_t bytes, uint64_t seed);
// The same pattern written on the device, on `stream` (asynchronous).
void fill_random_device(void* dev, size_t bytes, uint64_t seed, cudaStream_t stream);
// Asynchronous memset on `stream`.
void poison_device(void* dev, size_t bytes, uint8_t byte, cudaStream_t stream);
// Synchronous copies on `stream` (they synchronize it).
void upload(void* dev, const void* host, size_t bytes, cudaStream_t stream);
std::vector<uint8_t> download(const void* dev, size_t bytes, cudaStream_t stream);
template <class T>
std::vector<T> download_n(const T* dev, size_t n, cudaStream_t stream) {
  std::vector<T> out(n);
  auto raw = download(dev, n * sizeof(T), stream);
  if (n) std::memcpy(out.data(), raw.data(), n * sizeof(T));
  return out;
}
// Bitwise comparison; on mismatch names `what`, the count of differing bytes and the first few.
::testing::AssertionResult bytes_equal(const void* expected, const void* actual, size_t bytes,
                                       const std::string& what);

// ---- argument checks ---------------------------------------------------------------------------
// `call` must throw tilelink::Error before launching anything, with `op` in its message; `what`
// names the bad argument in the failure message.
template <class Call>
void expect_refused(Call&& call, const std::string& op, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << op << " accepted " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << what << ": " << e.what();
  }
}

// ---- multi-process tests --------------------------------------------------------------------------
// The main() of a test binary run under mpirun: creates the MpiWorld, points *ctx at its context
// for the tests, runs them, and ends with a barrier so no rank leaves while a peer still maps its
// heap. Returns the exit code (2 when the world itself failed, with `name` in the message).
int run_tests_in_mpi_world(int argc, char** argv, const char* name, Context** ctx);
// Rank 0's fresh_seed(), on every rank (collective): each rank can then rebuild any peer's data.
uint64_t shared_fresh_seed(Context& ctx);

}  // namespace tilelink::test
