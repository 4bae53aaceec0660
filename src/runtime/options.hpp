// Resolution of WorldOptions against the environment: explicit options win, then the env vars,
// then the defaults. Pure (the environment is passed in), so it is tested on the CPU.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "tilelink/runtime/context.hpp"

namespace tilelink {

inline constexpr uint64_t kDefaultHeapMiB = 2048;
inline constexpr uint64_t kDefaultSignalSlots = 65536;  // per 8 ranks of the world

// Signal slots per rank unless set: the per-source slots of the ops' tiles grow with the world
// size (a GEMM-AllReduce over 16 ranks at M = 256 x 16 asked for 43k), so 65536 per 8 ranks.
inline uint64_t default_signal_slots(int world_ranks) {
  return kDefaultSignalSlots * uint64_t(std::max(1, (world_ranks + 7) / 8));
}
inline constexpr uint64_t kDefaultWaitTimeoutMs = 5000;
inline constexpr uint64_t kMinBarrierTimeoutMs = 60000;

struct ResolvedOptions {
  size_t heap_bytes;            // per rank
  size_t signal_slots;          // per rank
  uint64_t wait_timeout_ms;     // bound on every device-side wait
  uint64_t barrier_timeout_ms;  // bound on every host barrier and allgather (in-process, MPI)
};

// Returns the value of an environment variable, or nullptr when it is unset.
using EnvLookup = std::function<const char*(const char*)>;

// Throws tilelink::Error naming the variable, its text and what it means when a set variable is
// not an integer in [min, max].
uint64_t parse_env_integer(const char* name, const char* text, uint64_t min, uint64_t max,
                           const char* meaning);

// `world_ranks`: the size of the world the options are for (it sets the default signal slots).
ResolvedOptions resolve_options(const WorldOptions& options, const EnvLookup& env, int world_ranks = 1);
// The transport of a multi-process world: an explicit choice wins, then $TILELINK_TRANSPORT
// ("cuda_ipc" or "nvshmem"), then cuda_ipc. Throws naming the variable for any other text.
Transport resolve_transport(Transport requested, const EnvLookup& env);
Transport resolve_transport(Transport requested);  // from the process environment
// Whether a multi-process world treats every process as its own node: requested, or
// $TILELINK_ONE_NODE_PER_PROCESS = 1 (0 or unset: no). Throws naming the variable for other text.
bool resolve_one_node_per_process(bool requested, const EnvLookup& env);
bool resolve_one_node_per_process(bool requested);  // from the process environment
ResolvedOptions resolve_options(const WorldOptions& options, int world_ranks = 1);  // from the environment

}  // namespace tilelink
