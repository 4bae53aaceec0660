// tilelink/ops/topology.hpp — what the ops' automatic choices depend on besides the call's shape.
#pragma once

#include "tilelink/runtime/context.hpp"

namespace tilelink {

// The world size, how many ranks share this rank's GPU, and the SMs this rank may use (its share
// of the GPU). The ops take it from their Context; tests of the rules state it directly.
struct Topology {
  int world = 1;
  int ranks_on_device = 1;
  int sm_count = 132;
};

inline Topology topology_of(const Context& ctx) {
  return {ctx.num_ranks(), ctx.ranks_on_device(), ctx.sm_count()};
}

}  // namespace tilelink
