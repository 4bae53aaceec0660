#include "options.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace tilelink {

uint64_t parse_env_integer(const char* name, const char* text, uint64_t min, uint64_t max,
                           const char* meaning) {
  const char* p = text;
  while (std::isspace(static_cast<unsigned char>(*p))) ++p;
  bool ok = std::isdigit(static_cast<unsigned char>(*p));  // strtoull would accept "-1"
  char* end = nullptr;
  errno = 0;
  unsigned long long v = ok ? std::strtoull(p, &end, 10) : 0;
  if (ok) {
    while (std::isspace(static_cast<unsigned char>(*end))) ++end;
    ok = *end == '\0' && errno != ERANGE && v >= min && v <= max;
  }
  TL_REQUIRE(ok, "tilelink: environment variable ", name, "='", text, "' is not valid: expected ",
             meaning, ", an integer from ", min, " to ", max);
  return v;
}

ResolvedOptions resolve_options(const WorldOptions& options, const EnvLookup& env, int world_ranks) {
  auto from_env = [&](const char* name, uint64_t fallback, uint64_t min, uint64_t max,
                      const char* meaning) {
    const char* text = env ? env(name) : nullptr;
    return (text == nullptr || *text == '\0') ? fallback
                                              : parse_env_integer(name, text, min, max, meaning);
  };
  ResolvedOptions r{};
  r.heap_bytes = options.heap_bytes != 0
                     ? options.heap_bytes
                     : from_env("TILELINK_HEAP_MB", kDefaultHeapMiB, 1, uint64_t(1) << 20,
                                "the symmetric heap per rank in MiB") << 20;
  r.signal_slots = options.signal_slots != 0
                       ? options.signal_slots
                       : from_env("TILELINK_SIGNAL_SLOTS", default_signal_slots(world_ranks), 1,
                                  uint64_t(1) << 32, "the number of 64-bit signal slots per rank");
  r.wait_timeout_ms = options.wait_timeout_ms != 0
                          ? options.wait_timeout_ms
                          : from_env("TILELINK_WAIT_TIMEOUT_MS", kDefaultWaitTimeoutMs, 1,
                                     uint64_t(24) * 3600 * 1000,
                                     "the bound on every device-side wait in milliseconds");
  // A host barrier must outlast the device waits it may sit behind, so that the device reports
  // the root cause first.
  const uint64_t barrier_default = std::max(4 * r.wait_timeout_ms, kMinBarrierTimeoutMs);
  r.barrier_timeout_ms = options.barrier_timeout_ms != 0
                             ? options.barrier_timeout_ms
                             : from_env("TILELINK_BARRIER_TIMEOUT_MS", barrier_default, 1,
                                        uint64_t(7) * 24 * 3600 * 1000,
                                        "the bound on every host barrier in milliseconds");
  return r;
}

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::automatic: return "automatic";
    case Transport::cuda_ipc: return "cuda_ipc";
    case Transport::nvshmem: return "nvshmem";
  }
  return "unknown";
}

Transport resolve_transport(Transport requested, const EnvLookup& env) {
  if (requested != Transport::automatic) {
    TL_REQUIRE(requested == Transport::cuda_ipc || requested == Transport::nvshmem, "tilelink: transport ",
               int(requested), " is not one of automatic, cuda_ipc, nvshmem");
    return requested;
  }
  const char* text = env ? env("TILELINK_TRANSPORT") : nullptr;
  if (text == nullptr || *text == '\0') return Transport::cuda_ipc;
  for (Transport t : {Transport::cuda_ipc, Transport::nvshmem})
    if (std::string_view(text) == transport_name(t)) return t;
  detail::fail("tilelink: environment variable TILELINK_TRANSPORT='", text,
               "' is not valid: expected cuda_ipc or nvshmem (how a multi-process world reaches its peers)");
}

Transport resolve_transport(Transport requested) {
  return resolve_transport(requested, [](const char* name) { return std::getenv(name); });
}

bool resolve_one_node_per_process(bool requested, const EnvLookup& env) {
  if (requested) return true;
  const char* text = env ? env("TILELINK_ONE_NODE_PER_PROCESS") : nullptr;
  if (text == nullptr || *text == '\0') return false;
  return parse_env_integer("TILELINK_ONE_NODE_PER_PROCESS", text, 0, 1,
                           "1 to treat every process as its own node (NVSHMEM put-with-signal to every peer),"
                           " or 0") == 1;
}

bool resolve_one_node_per_process(bool requested) {
  return resolve_one_node_per_process(requested, [](const char* name) { return std::getenv(name); });
}

ResolvedOptions resolve_options(const WorldOptions& options, int world_ranks) {
  return resolve_options(options, [](const char* name) { return std::getenv(name); }, world_ranks);
}

}  // namespace tilelink
