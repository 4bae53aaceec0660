// Cached in-process worlds and small utilities for GPU tests (see gpu_test.hpp).
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>

#include "gpu/common/gpu_test.hpp"

namespace tilelink::test {

namespace {

std::mutex& worlds_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::pair<int, size_t>, std::unique_ptr<InProcessWorld>>& worlds() {
  static std::map<std::pair<int, size_t>, std::unique_ptr<InProcessWorld>> w;
  return w;
}

// Tears the worlds down after the last test, while the CUDA runtime is still alive (static
// destructors run after it may have begun shutting down).
class ReleaseWorlds : public ::testing::Environment {
 public:
  void TearDown() override { release_worlds(); }
};
[[maybe_unused]] ::testing::Environment* const kReleaseWorlds =
    ::testing::AddGlobalTestEnvironment(new ReleaseWorlds);

}  // namespace

InProcessWorld& world(int ranks, size_t heap_mib) {
  std::lock_guard<std::mutex> lock(worlds_mutex());
  // One world alive at a time (rebuilt when the size changes), so the process holds at most 16 of
  // the library's streams per GPU, fewer than its 32 hardware queues: with the worlds of 1-8 ranks
  // all cached (72 streams) the op tests stalled now and then (docs/ARCHITECTURE.md, ranks sharing
  // a GPU). TILELINK_TEST_KEEP_WORLDS=1 caches every size again, to reproduce that.
  static const bool keep_worlds = [] {
    const char* v = std::getenv("TILELINK_TEST_KEEP_WORLDS");
    return v != nullptr && std::string(v) == "1";
  }();
  if (!keep_worlds) {
    for (auto it = worlds().begin(); it != worlds().end();)
      it = it->first == std::make_pair(ranks, heap_mib) ? std::next(it) : worlds().erase(it);
  }
  auto& slot = worlds()[{ranks, heap_mib}];
  if (!slot) {
    WorldOptions options;
    options.heap_bytes = heap_mib << 20;
    slot = std::make_unique<InProcessWorld>(ranks, options);
  }
  return *slot;
}

void release_worlds() {
  std::lock_guard<std::mutex> lock(worlds_mutex());
  worlds().clear();
}

std::string world_size_name(const ::testing::TestParamInfo<int>& info) {
  return "ranks" + std::to_string(info.param);
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    detail::fail("launch of ", what, " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
}

}  // namespace tilelink::test
