// How a world's ranks share their GPUs (src/runtime/gpu_sharing.hpp): the values every rank
// plans with must come out the same on every rank, whatever the layout.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/gpu_sharing.hpp"
#include "tilelink/core/error.hpp"

namespace {

using tilelink::gpu_sharing;
using tilelink::RankGpu;

// Rank r on GPU placement[r] (GPU g has sms[g] SMs).
std::vector<RankGpu> layout(const std::vector<int>& placement, const std::vector<int>& sms) {
  std::vector<RankGpu> gpus;
  for (int g : placement) {
    RankGpu r;
    r.uuid[0] = uint8_t(g + 1);
    r.uuid[15] = 0xab;
    r.sms = sms.at(size_t(g));
    gpus.push_back(r);
  }
  return gpus;
}

TEST(GpuSharing, OneGpuPerRank) {
  const auto g = layout({0, 1}, {132, 132});
  for (int me : {0, 1}) {
    const auto s = gpu_sharing(g, me);
    EXPECT_EQ(s.ranks_on_my_gpu, 1);
    EXPECT_EQ(s.max_ranks_per_gpu, 1);
    EXPECT_EQ(s.sm_share, 132);
  }
}

TEST(GpuSharing, AllOnOneGpu) {
  const auto g = layout({0, 0, 0, 0, 0, 0, 0, 0}, {132});
  const auto s = gpu_sharing(g, 5);
  EXPECT_EQ(s.ranks_on_my_gpu, 8);
  EXPECT_EQ(s.max_ranks_per_gpu, 8);
  EXPECT_EQ(s.sm_share, 16);
}

// 3 ranks round-robin over 2 GPUs: ranks 0 and 2 share GPU 0, rank 1 is alone on GPU 1. Rank 1
// must still plan as a rank sharing a GPU (same path, same SM count), or the ranks' signal
// layouts and collectives disagree.
TEST(GpuSharing, UnevenSharingIsTheSameOnEveryRank) {
  for (const auto& placement : {std::vector<int>{0, 1, 0}, {0, 1, 0, 1, 0}, {0, 1, 0, 1, 0, 1, 0}, {1, 0, 0}}) {
    const auto g = layout(placement, {132, 132});
    const auto first = gpu_sharing(g, 0);
    for (int me = 0; me < int(placement.size()); ++me) {
      const auto s = gpu_sharing(g, me);
      EXPECT_EQ(s.max_ranks_per_gpu, first.max_ranks_per_gpu);
      EXPECT_EQ(s.sm_share, first.sm_share);
      int on_mine = 0;
      for (int p : placement) on_mine += p == placement[size_t(me)];
      EXPECT_EQ(s.ranks_on_my_gpu, on_mine);
    }
    EXPECT_EQ(first.max_ranks_per_gpu, int(placement.size() + 1) / 2 > 1 ? int(placement.size() + 1) / 2 : 2);
    EXPECT_EQ(first.sm_share, 132 / first.max_ranks_per_gpu);
  }
}

// GPUs with different SM counts: the share is the smallest any rank gets.
TEST(GpuSharing, SmallestShareOfUnequalGpus) {
  const auto g = layout({0, 1, 1}, {132, 114});
  EXPECT_EQ(gpu_sharing(g, 0).sm_share, 57);
  EXPECT_EQ(gpu_sharing(g, 0).max_ranks_per_gpu, 2);
  EXPECT_EQ(gpu_sharing(g, 0).ranks_on_my_gpu, 1);
  const auto tiny = layout({0, 0, 0, 0}, {2});
  EXPECT_EQ(gpu_sharing(tiny, 0).sm_share, 1) << "never 0 SMs";
}

}  // namespace

TEST(GpuSharing, HardwareQueues) {
  using tilelink::hardware_queues;
  using tilelink::hardware_queues_needed;
  EXPECT_EQ(hardware_queues(nullptr), 8);
  EXPECT_EQ(hardware_queues(""), 8);
  EXPECT_EQ(hardware_queues("16"), 16);
  EXPECT_EQ(hardware_queues("64"), 32);  // CUDA caps it
  EXPECT_EQ(hardware_queues("many"), 8);
  EXPECT_EQ(hardware_queues_needed(1), 0);  // a GPU to itself needs nothing of the environment
  EXPECT_LE(hardware_queues_needed(4), hardware_queues("8"));
  EXPECT_GT(hardware_queues_needed(8), hardware_queues(nullptr));
  EXPECT_LE(hardware_queues_needed(8), hardware_queues("32"));
}

// The queue budget is the process's: every live world's ranks on a GPU count, a refused world
// adds nothing, and a destroyed world gives its share back.
TEST(GpuSharing, LiveRanksCountEveryWorld) {
  tilelink::LiveRanksPerGpu live(32);
  const std::vector<int> eight_on_gpu0(8, 0);
  live.reserve(eight_on_gpu0);
  EXPECT_EQ(live.ranks_on(0), 8);
  live.reserve({0, 1, 0, 1, 0, 1, 0, 1});  // 4 more on GPU 0: 12 ranks, 24 queues
  EXPECT_EQ(live.ranks_on(0), 12);
  EXPECT_EQ(live.ranks_on(1), 4);
  try {
    live.reserve({0, 0, 0, 0, 0});  // 17 ranks on GPU 0 would need 34 queues
    ADD_FAILURE() << "a world past the GPU's queues was accepted";
  } catch (const tilelink::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("GPU 0 already runs 12 ranks"), std::string::npos) << what;
    EXPECT_NE(what.find("destroy the other worlds"), std::string::npos) << what;
  }
  EXPECT_EQ(live.ranks_on(0), 12) << "a refused world must reserve nothing";
  live.release(eight_on_gpu0);
  EXPECT_EQ(live.ranks_on(0), 4);
  live.reserve({0, 0, 0, 0, 0});  // fits again: 9 ranks
  EXPECT_EQ(live.ranks_on(0), 9);

  // Alone on a GPU under CUDA's default of 8 queues: the error names the setting to change.
  tilelink::LiveRanksPerGpu defaults(tilelink::hardware_queues(nullptr));
  defaults.reserve({2, 2, 2, 2});  // 4 ranks need 8 queues: fits
  defaults.release({2, 2, 2, 2});
  EXPECT_EQ(defaults.ranks_on(2), 0);
  try {
    defaults.reserve({2, 2, 2, 2, 2});
    ADD_FAILURE() << "5 ranks on a GPU with 8 queues were accepted";
  } catch (const tilelink::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA_DEVICE_MAX_CONNECTIONS=32"), std::string::npos) << e.what();
  }
  defaults.reserve({2});  // one rank alone needs no queue of its own budget
  EXPECT_EQ(defaults.ranks_on(2), 1);
}
