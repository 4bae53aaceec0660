// tilelink/ops/topology.hpp — what the ops' automatic choices depend on besides the call's shape.
#pragma once

#include "tilelink/runtime/context.hpp"

namespace tilelink {

// The world size, the most ranks sharing one GPU, and the SMs each rank may use — all three the
// same on every rank of a world, so every rank's automatic choices agree (a rank alone on its
// GPU in a world where others share one takes the shared-GPU choices too). The ops take it from
// their Context; tests of the rules state it directly.
struct Topology {
  int world = 1;
  int max_ranks_per_gpu = 1;  // 1: every rank has its own GPU
  int sm_count = 132;         // the smallest SM share of any rank (Context::sm_count)
  bool peers_load_store = true;  // false: some peers only through NVSHMEM put-with-signal
};

inline Topology topology_of(const Context& ctx) {
  return {ctx.num_ranks(), ctx.max_ranks_per_gpu(), ctx.sm_count(), ctx.peers_load_store()};
}

}  // namespace tilelink
