// src/runtime/gpu_sharing.hpp — how the ranks of a world share their GPUs (pure host logic, so a
// CPU test pins it: tests/cpu/gpu_sharing_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace tilelink {

// What every rank says about its GPU: an identity that is the same in every process (the UUID)
// and its SM count.
struct RankGpu {
  std::array<uint8_t, 16> uuid{};
  int32_t sms = 0;
};

struct GpuSharing {
  int ranks_on_my_gpu = 1;    // ranks on the GPU of the rank asking
  int max_ranks_per_gpu = 1;  // the most ranks on any one GPU of the world
  int sm_share = 1;           // min over ranks of (its GPU's SMs / ranks on that GPU), >= 1
};

// `gpus[r]` is rank r's report; `me` the asking rank. The last two fields depend only on `gpus`,
// so every rank computes the same values from the same allgathered reports.
GpuSharing gpu_sharing(const std::vector<RankGpu>& gpus, int me);

// In-process ranks sharing one GPU share its hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS,
// default 8). 8 ranks on one H200 with the default once deadlocked until their waits timed out.
// Probes of up to 72 streams found no false dependency between streams in the patterns they
// tried, but the op tests stalled now and then while the process held 72 streams over 32 queues,
// and never with 16 (docs/ARCHITECTURE.md, shared GPUs): the mapping of streams to queues is the
// driver's, so every stream counts, not only the library's. The queues a GPU with
// `ranks_per_gpu` in-process ranks needs at the least (its two streams per rank):
inline int hardware_queues_needed(int ranks_per_gpu) { return ranks_per_gpu > 1 ? 2 * ranks_per_gpu : 0; }
// The queues CUDA gives each GPU under `env_value` (CUDA_DEVICE_MAX_CONNECTIONS, nullptr: unset).
int hardware_queues(const char* env_value);

// The in-process ranks of every live world of this process, per GPU ordinal. The queue budget is
// the process's, not one world's: two worlds of 8 ranks on one GPU need the queues of 16 ranks.
// A world reserves one rank per entry of its devices before it creates a stream and releases them
// when it is destroyed; a reservation that would leave a GPU needing more queues than `queues` is
// refused (tilelink::Error naming the GPU, what its live worlds hold and what to change), and
// then adds nothing.
class LiveRanksPerGpu {
 public:
  explicit LiveRanksPerGpu(int queues) : queues_(queues) {}
  void reserve(const std::vector<int>& devices);
  void release(const std::vector<int>& devices);
  int ranks_on(int device) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, int> ranks_;  // GPU ordinal -> in-process ranks of live worlds on it
  int queues_;
};

}  // namespace tilelink
