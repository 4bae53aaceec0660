// Cached in-process worlds and small utilities for GPU tests (see gpu_test.hpp).
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
// The one cached world and what it was made for: (ranks, heap MiB).
struct CachedWorld {
  std::pair<int, size_t> key{0, 0};
  std::unique_ptr<InProcessWorld> world;
};
CachedWorld& cached() {
  static CachedWorld w;
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
  // One world alive at a time (rebuilt when the size changes): the library refuses a world whose
  // GPU would then hold more in-process ranks than its hardware queues carry (16 at 32 queues),
  // and the worlds of 1-8 ranks together hold 36.
  CachedWorld& c = cached();
  if (c.world && c.key == std::make_pair(ranks, heap_mib)) return *c.world;
  c.world.reset();  // before the next one exists
  WorldOptions options;
  options.heap_bytes = heap_mib << 20;
  c.world = std::make_unique<InProcessWorld>(ranks, options);
  c.key = {ranks, heap_mib};
  return *c.world;
}

void release_worlds() {
  std::lock_guard<std::mutex> lock(worlds_mutex());
  cached().world.reset();
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
