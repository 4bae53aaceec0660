// In-process worlds share their GPUs' hardware queues: the library counts the ranks of every live
// world per GPU and refuses the world that would need more queues than CUDA gives (2 per rank),
// then takes a world again once another is gone. Holds on any layout: one GPU visible (8 ranks on
// it per world) or several (the 8 ranks spread round-robin).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"

namespace {

using tilelink::InProcessWorld;

// CUDA's queues per GPU under the environment the test runs in (default 8, at most 32).
int queues_per_gpu() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int q = v != nullptr && *v != '\0' ? std::atoi(v) : 8;
  return std::clamp(q > 0 ? q : 8, 1, 32);
}

TEST(InProcessWorlds, LiveWorldsShareTheGpusQueues) {
  tilelink::test::release_worlds();  // the suite's cached world would count too
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  constexpr int kRanks = 8;
  const int busiest = (kRanks + gpus - 1) / gpus;  // ranks of one world on its busiest GPU
  // Worlds that fit: each adds `busiest` ranks to GPU 0, and a GPU holds queues/2 ranks (a GPU
  // with one rank alone needs none of the budget).
  const int fit = busiest == 1 ? 0 : (queues_per_gpu() / 2) / busiest;
  if (fit == 0) GTEST_SKIP() << "one rank per GPU: nothing is counted against the queues";
  tilelink::WorldOptions options;
  options.heap_bytes = size_t(16) << 20;
  std::vector<std::unique_ptr<InProcessWorld>> live;
  for (int i = 0; i < fit; ++i) {
    SCOPED_TRACE("world " + std::to_string(i + 1) + " of the " + std::to_string(fit) + " that fit");
    live.push_back(std::make_unique<InProcessWorld>(kRanks, options));
  }
  try {
    InProcessWorld extra(kRanks, options);
    ADD_FAILURE() << "a world past GPU 0's " << queues_per_gpu() << " queues was accepted (" << fit
                  << " worlds of " << kRanks << " ranks already live, " << busiest << " per GPU each)";
  } catch (const tilelink::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("already runs " + std::to_string(fit * busiest) + " ranks"), std::string::npos) << what;
    EXPECT_NE(what.find("destroy the other worlds"), std::string::npos) << what;
  }
  // The live worlds still work after the refusal, and a world fits again once one is gone.
  for (auto& w : live) w->run([](tilelink::Context& ctx) { ctx.barrier(); });
  live.pop_back();
  live.push_back(std::make_unique<InProcessWorld>(kRanks, options));
  live.back()->run([](tilelink::Context& ctx) { ctx.barrier(); });
}

}  // namespace
