// tilelink/ll/team.cuh — the device-side view of a world, passed to every kernel by value.
//
// A Team is plain data: which rank this kernel runs for, where every rank's symmetric heap is
// mapped in this rank's address space, the signal pool, the epoch of the current op call, the
// wait timeout and where a timed-out wait reports. The host builds it (Context::team()); the
// device only reads it. Nothing here reads threadIdx: scope of cooperation is the caller's.
// Kernels compare signals with ll::call_epoch(team) (signal.cuh), which reads the epoch on the
// device when the call was begun on a stream (epoch_word): a call captured in a CUDA graph then
// gets a fresh epoch at every replay.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TL_HOST_DEVICE __host__ __device__ __forceinline__
#define TL_DEVICE __device__ __forceinline__
#else
#define TL_HOST_DEVICE inline
#define TL_DEVICE inline
#endif

namespace tilelink::ll {

// Peers one Team reaches by load/store: one NVLink domain (the 8 GPUs of an HGX board). This
// sizes Team's table of mapped heaps only; problem sizes and the world size stay run-time values.
inline constexpr int kMaxLocalRanks = 8;

// Ranks of one world. Those outside the load/store table (other nodes) are reached through
// NVSHMEM put-with-signal (ll/nvshmem.cuh), which needs no per-peer state in the Team.
inline constexpr int kMaxWorldRanks = 1024;

// Comparison used by signal waits.
enum class Cmp : int32_t { eq = 0, ne, ge, gt, lt, le };

// Signal slots every rank reserves for the world's abort (see ll/signal.cuh): slot 0 holds the
// epoch of the latest aborted call, slot 1 the rank that raised it, plus one, plus kAbortRefused
// when that rank refused the call (its host could not make it) rather than a wait timing out.
inline constexpr int kAbortSlots = 2;
inline constexpr uint64_t kAbortRefused = uint64_t(1) << 32;

// Filled by the first wait of a rank that times out, in host-mapped pinned memory, which the host
// reads after the kernel returned (Context::synchronize) and clears once it raised the error.
struct WaitReport {
  int32_t failed;     // 0 until a wait timed out; the first reporter claims it with atomicCAS
  int32_t rank;       // rank whose wait timed out
  int64_t slot;       // signal slot index within that rank's pool, -1 if not a pool signal
  int64_t tile;       // tile id the wait was for, -1 if none
  uint64_t expected;  // value compared against
  uint64_t observed;  // last value read
  int32_t cmp;        // Cmp
  int32_t peer;       // rank that owns the signal word (== rank for local waits)
  uint64_t waited_ns; // how long it waited
  char site[48];      // which wait: "consumer_tile_wait", "barrier_all", ...
  int32_t complete;   // 1 once the reporter wrote every field above
  int32_t aborted;    // 1 once a wait of this rank gave up because the world's abort was raised
                      // for its call (by a timed-out wait here or on another rank)
};

struct Team {
  int32_t rank;
  int32_t num_ranks;
  int32_t local_first;         // the world rank whose heap is heap_base[0] (0 in worlds of up to
                               // kMaxLocalRanks ranks; else a window holding this rank)
  char* heap_base[kMaxLocalRanks];  // ranks local_first + i: their symmetric heaps as mapped in
                                    // this rank's address space; null where load/store cannot reach
  uint64_t heap_bytes;         // size of every rank's heap (equal across ranks)
  uint64_t* signal_base;       // this rank's signal pool (inside its heap, at the same offset everywhere)
  uint64_t signal_slots;       // number of 64-bit slots in the pool
  uint64_t epoch;              // the host's count of op calls (the epoch of calls begun on the
                               // host alone, Context::begin_op(op)); kernels use ll::call_epoch
  uint64_t wait_timeout_ns;    // bound on every wait (TILELINK_WAIT_TIMEOUT_MS)
  WaitReport* report;          // host-mapped pinned memory
  uint64_t* barrier_slots;     // num_ranks slots of this rank's signal pool, reserved by the
                               // Context for barrier_all/sync_all (same offset on every rank):
                               // slot r holds the last barrier generation rank r announced here;
                               // never reset (generations only grow). nullptr makes every
                               // barrier trap with a message saying so
  uint64_t* abort_slots;       // kAbortSlots slots of this rank's signal pool (same offset on every
                               // rank): the world's abort, raised on every rank by a timed-out
                               // wait; nullptr: waits neither watch nor raise it
  const uint64_t* epoch_word;  // calls begun on a stream (Context::begin_op(op, stream)): the
                               // device word holding the epoch, advanced on that stream at the
                               // start of every call, replays of a CUDA graph included; nullptr:
                               // the epoch is `epoch`
};

}  // namespace tilelink::ll
