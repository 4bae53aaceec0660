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
  // TILELINK_TEST_ONE_WORLD=1: at most one world alive, so the process holds only its ranks'
  // streams (2 per rank) — to tell stalls from hardware work queues shared between the streams of
  // many cached worlds apart from stalls within one world. Slower: worlds are rebuilt per size.
  static const bool one_world = [] {
    const char* v = std::getenv("TILELINK_TEST_ONE_WORLD");
    return v != nullptr && std::string(v) == "1";
  }();
  if (one_world) {
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
