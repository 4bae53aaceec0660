// src/runtime/gpu_sharing.cpp — see gpu_sharing.hpp.
#include "gpu_sharing.hpp"

#include <algorithm>

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

}  // namespace tilelink
