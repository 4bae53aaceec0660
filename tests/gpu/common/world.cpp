// Cached in-process worlds and small utilities for GPU tests (see gpu_test.hpp).
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

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
