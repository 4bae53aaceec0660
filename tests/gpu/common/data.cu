// Random data, poison and bitwise comparison for GPU tests (see gpu_test.hpp).
#include <cstdlib>
#include <random>
#include <sstream>

#include "gpu/common/gpu_test.hpp"

namespace tilelink::test {

namespace {

// One thread per 8-byte word of the pattern; the first and last words may be partial (the
// buffer need not be aligned: word w covers pattern bytes [8w, 8w+8)).
__global__ void fill_random_kernel(uint8_t* p, size_t bytes, uint64_t seed) {
  const size_t words = (bytes + 7) / 8;
  for (size_t w = blockIdx.x * size_t(blockDim.x) + threadIdx.x; w < words;
       w += size_t(gridDim.x) * blockDim.x) {
    const uint64_t v = random_word(seed, w);
    const size_t end = bytes - 8 * w < 8 ? bytes - 8 * w : 8;
    for (size_t i = 0; i < end; ++i) p[8 * w + i] = uint8_t(v >> (8 * i));
  }
}

void cuda_or_fail(cudaError_t err, const char* call) {
  if (err != cudaSuccess)
    detail::fail("test helper: ", call, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

}  // namespace

uint64_t fresh_seed() {
  // A failure's seed can be replayed; otherwise every run draws new data.
  if (const char* fixed = std::getenv("TILELINK_TEST_SEED"); fixed != nullptr && *fixed != '\0')
    return std::strtoull(fixed, nullptr, 0);
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

std::string seed_trace(uint64_t seed) {
  std::ostringstream os;
  os << "random seed 0x" << std::hex << seed << " (fresh every run; TILELINK_TEST_SEED=0x" << seed << " replays it)";
  return os.str();
}

uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  return splitmix64(splitmix64(splitmix64(seed ^ 0x5EEDull) + a) + b) + c;
}

void random_bytes(void* host, size_t bytes, uint64_t seed) {
  auto* p = static_cast<uint8_t*>(host);
  for (size_t w = 0; 8 * w < bytes; ++w) {
    const uint64_t v = random_word(seed, w);
    for (size_t i = 0; i < 8 && 8 * w + i < bytes; ++i) p[8 * w + i] = uint8_t(v >> (8 * i));
  }
}

std::vector<uint8_t> random_bytes(size_t bytes, uint64_t seed) {
  std::vector<uint8_t> v(bytes);
  random_bytes(v.data(), bytes, seed);
  return v;
}

void fill_random_device(void* dev, size_t bytes, uint64_t seed, cudaStream_t stream) {
  if (bytes == 0) return;
  const size_t words = (bytes + 7) / 8;
  const unsigned blocks = unsigned(words / 256 + 1 < 1024 ? words / 256 + 1 : 1024);
  fill_random_kernel<<<blocks, 256, 0, stream>>>(static_cast<uint8_t*>(dev), bytes, seed);
  cuda_or_fail(cudaGetLastError(), "fill_random_kernel launch");
}

void poison_device(void* dev, size_t bytes, uint8_t byte, cudaStream_t stream) {
  cuda_or_fail(cudaMemsetAsync(dev, byte, bytes, stream), "cudaMemsetAsync (poison)");
}

void upload(void* dev, const void* host, size_t bytes, cudaStream_t stream) {
  cuda_or_fail(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D");
  cuda_or_fail(cudaStreamSynchronize(stream), "cudaStreamSynchronize after upload");
}

std::vector<uint8_t> download(const void* dev, size_t bytes, cudaStream_t stream) {
  std::vector<uint8_t> out(bytes);
  if (bytes == 0) return out;
  cuda_or_fail(cudaMemcpyAsync(out.data(), dev, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync D2H");
  cuda_or_fail(cudaStreamSynchronize(stream), "cudaStreamSynchronize after download");
  return out;
}

::testing::AssertionResult bytes_equal(const void* expected, const void* actual, size_t bytes,
                                       const std::string& what) {
  auto* e = static_cast<const uint8_t*>(expected);
  auto* a = static_cast<const uint8_t*>(actual);
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < bytes; ++i) {
    if (e[i] == a[i]) continue;
    if (bad < 8)
      first << "\n    byte " << i << ": expected 0x" << std::hex << int(e[i]) << ", got 0x" << int(a[i])
            << std::dec;
    ++bad;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << bytes
                                       << " bytes differ; first:" << first.str();
}

}  // namespace tilelink::test
