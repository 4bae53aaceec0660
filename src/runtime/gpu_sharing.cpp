// src/runtime/gpu_sharing.cpp — see gpu_sharing.hpp.
#include "gpu_sharing.hpp"

#include <algorithm>
#include <cstdlib>

#include "tilelink/core/error.hpp"

namespace tilelink {

GpuSharing gpu_sharing(const std::vector<RankGpu>& gpus, int me) {
  auto ranks_on = [&](const RankGpu& g) {
    int n = 0;
    for (const RankGpu& o : gpus) n += o.uuid == g.uuid;
    return n;
  };
  GpuSharing s;
  s.ranks_on_my_gpu = ranks_on(gpus.at(size_t(me)));
  s.sm_share = gpus.at(size_t(me)).sms;
  for (const RankGpu& g : gpus) {
    const int n = ranks_on(g);
    s.max_ranks_per_gpu = std::max(s.max_ranks_per_gpu, n);
    s.sm_share = std::min(s.sm_share, g.sms / n);
  }
  s.sm_share = std::max(s.sm_share, 1);
  return s;
}

int hardware_queues(const char* env_value) {
  constexpr int kDefault = 8, kMax = 32;  // CUDA's documented default and limit
  if (env_value == nullptr || *env_value == '\0') return kDefault;
  char* end = nullptr;
  const long v = std::strtol(env_value, &end, 10);
  if (*end != '\0' || v < 1) return kDefault;
  return int(std::min<long>(v, kMax));
}

void LiveRanksPerGpu::reserve(const std::vector<int>& devices) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<int, int> mine;
  for (int d : devices) ++mine[d];
  for (const auto& [device, ranks] : mine) {
    const int live = ranks_.count(device) ? ranks_.at(device) : 0;
    const int needed = hardware_queues_needed(live + ranks);
    if (needed <= queues_) continue;
    if (live == 0)
      detail::fail("InProcessWorld: ", ranks, " ranks share GPU ", device, " in this process, which needs ",
                   needed, " hardware queues (2 per rank) but CUDA gives it ", queues_,
                   "; set CUDA_DEVICE_MAX_CONNECTIONS=32 in the environment before the process's first"
                   " CUDA call (it carries up to 16 ranks per GPU), or run fewer ranks per GPU");
    detail::fail("InProcessWorld: GPU ", device, " already runs ", live, " ranks of other live in-process worlds;",
                 " with this world's ", ranks, " it would need ", needed, " hardware queues (2 per rank) of its ",
                 queues_, ": destroy the other worlds first (ranks sharing a GPU stall when it has more"
                 " streams than queues)");
  }
  for (const auto& [device, ranks] : mine) ranks_[device] += ranks;
}

void LiveRanksPerGpu::release(const std::vector<int>& devices) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (int d : devices)
    if (--ranks_[d] <= 0) ranks_.erase(d);
}

int LiveRanksPerGpu::ranks_on(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ranks_.count(device) ? ranks_.at(device) : 0;
}

}  // namespace tilelink
