// Resolution of WorldOptions against the environment: explicit options win, then the env vars,
// then the defaults. Pure (the environment is passed in), so it is tested on the CPU.
#pragma once

#include <cstdint>
#include <functional>

#include "tilelink/runtime/context.hpp"

namespace tilelink {

inline constexpr uint64_t kDefaultHeapMiB = 2048;
inline constexpr uint64_t kDefaultSignalSlots = 65536;
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

ResolvedOptions resolve_options(const WorldOptions& options, const EnvLookup& env);
// The transport of a multi-process world: an explicit choice wins, then $TILELINK_TRANSPORT
// ("cuda_ipc" or "nvshmem"), then cuda_ipc. Throws naming the variable for any other text.
Transport resolve_transport(Transport requested, const EnvLookup& env);
Transport resolve_transport(Transport requested);  // from the process environment
// Whether a multi-process world treats every process as its own node: requested, or
// $TILELINK_ONE_NODE_PER_PROCESS = 1 (0 or unset: no). Throws naming the variable for other text.
bool resolve_one_node_per_process(bool requested, const EnvLookup& env);
bool resolve_one_node_per_process(bool requested);  // from the process environment
ResolvedOptions resolve_options(const WorldOptions& options);  // from the process environment

}  // namespace tilelink
