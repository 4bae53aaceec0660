// src/runtime/gpu_sharing.cpp — see gpu_sharing.hpp.
#include "gpu_sharing.hpp"

#include <algorithm>
#include <cstdlib>

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

}  // namespace tilelink
