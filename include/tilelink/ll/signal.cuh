// tilelink/ll/signal.cuh — signal words: set/add on any rank, and bounded waits.
//
// A signal is a 64-bit word in the symmetric signal pool. Ops publish progress by *setting* a
// signal to the epoch of the current call (call_epoch(team)) with release semantics; consumers wait
// until the word is >= that epoch with acquire semantics. Epochs only grow, so a word left over
// from an earlier call can never satisfy a later wait, and nothing is ever reset.
//
// Every wait is bounded by Team::wait_timeout_ns. On timeout the waiting thread fills the
// rank's WaitReport (host-mapped) with rank, site, tile, slot, expected and observed value,
// raises the call's abort on every rank (so every wait of the call gives up), and returns; the
// host turns that into a tilelink::Error naming the op and printing all of it, on every rank, and
// later calls work. (The device prints too only with TILELINK_DEVICE_PRINTF: see
// report_wait_timeout_at.)
#pragma once

#include <cstdint>
#include <cstdio>

#include "tilelink/ll/identity.cuh"
#include "tilelink/ll/memory_order.cuh"
#include "tilelink/ll/team.cuh"
#include "tilelink/ll/timer.cuh"

namespace tilelink::ll {

// set: the word becomes `value`; add: `value` is added; max: the word becomes max(word, value) —
// the publication of an epoch: a late write of an older epoch can never lower a newer one.
enum class SignalOp : int32_t { set = 0, add = 1, max = 2 };

// Where a wait happens, for the timeout report.
struct WaitSite {
  int64_t tile = -1;
  const char* name = "signal_wait_until";
};

TL_HOST_DEVICE bool compare(uint64_t observed, Cmp cmp, uint64_t value) {
  switch (cmp) {
    case Cmp::eq: return observed == value;
    case Cmp::ne: return observed != value;
    case Cmp::ge: return observed >= value;
    case Cmp::gt: return observed > value;
    case Cmp::lt: return observed < value;
    case Cmp::le: return observed <= value;
  }
  return false;
}

inline const char* cmp_name(Cmp c) {
  switch (c) {
    case Cmp::eq: return "==";
    case Cmp::ne: return "!=";
    case Cmp::ge: return ">=";
    case Cmp::gt: return ">";
    case Cmp::lt: return "<";
    case Cmp::le: return "<=";
  }
  return "?";
}

#if defined(__CUDACC__)

// The epoch of the current op call. For a call begun on a stream it is read from the device word
// the stream advanced when the call began (written by an earlier kernel of the stream: a relaxed
// load sees it), so a CUDA graph replay, which the host never sees, still gets a fresh epoch.
TL_DEVICE uint64_t call_epoch(const Team& t) {
  return t.epoch_word != nullptr ? ld_relaxed_gpu(t.epoch_word) : t.epoch;
}

namespace detail {
TL_DEVICE const char* cmp_name_device(Cmp c) {
  switch (c) {
    case Cmp::eq: return "==";
    case Cmp::ne: return "!=";
    case Cmp::ge: return ">=";
    case Cmp::gt: return ">";
    case Cmp::lt: return "<";
    case Cmp::le: return "<=";
  }
  return "?";
}
}  // namespace detail

namespace detail {

// ---- the world's abort ---------------------------------------------------------------------
// A wait that times out does not trap (that would end the process's CUDA context, and with it
// every rank sharing the GPU). It raises the abort of its call on every rank instead: it writes
// the call's epoch into every rank's Team::abort_slots (max, so it never lowers a later call's
// abort) and returns. Every wait of that call, on any rank, watches its own rank's slot in its
// slow path and gives up too, so all kernels of the call end within microseconds, their outputs
// garbage; the host turns the reports into a tilelink::Error on every rank. A later call has a
// new epoch, which no abort names: the world stays usable.

// Whether the current call was aborted (relaxed: it orders nothing, the kernel only stops waiting).
TL_DEVICE bool call_aborted(const Team& t, uint64_t epoch) {
  return t.abort_slots != nullptr && ld<Order::relaxed, Scope::sys>(t.abort_slots) == epoch;
}

// A wait of this rank gave up because of the abort: the host then fails this rank's call too,
// even when it was another rank's wait that timed out.
TL_DEVICE void note_aborted(const Team& t) {
  if (t.report != nullptr) *reinterpret_cast<volatile int32_t*>(&t.report->aborted) = 1;
}

// Writes the abort of call `epoch` into every rank's slots, naming this rank (`why`: 0 for a
// timed-out wait, kAbortRefused for a call this rank's host refused). One thread. Ranks this one
// cannot reach by load/store (Team::heap_base null: another node, or the one-node-per-process
// setting) are skipped: their own waits give up at their bound.
TL_DEVICE void announce_abort(const Team& t, uint64_t epoch, uint64_t why) {
#pragma unroll 1
  for (int p = 0; p < t.num_ranks; ++p) {
    if (heap_base_of(t, p) == nullptr) continue;
    uint64_t* slots = symm_at(t, t.abort_slots, p);
    st<Order::relaxed, Scope::sys>(slots + 1, uint64_t(t.rank) + 1 + why);
    red_max<Order::release, Scope::sys>(slots, epoch);
  }
}

// Raises the abort of call `epoch` on every rank of the team from a wait of this rank (one
// thread; no function call and few live registers, so a producer warp on a reduced register
// budget can run it).
TL_DEVICE void raise_abort(const Team& t, uint64_t epoch) {
  if (t.abort_slots == nullptr) return;
  note_aborted(t);
  announce_abort(t, epoch, 0);
}

// Claims this rank's report (the first failure since the host last cleared it wins).
TL_DEVICE bool claim_report(WaitReport* r) { return r != nullptr && atomicCAS(&r->failed, 0, 1) == 0; }

TL_DEVICE void publish_report(WaitReport* r) {
  __threadfence_system();
  *reinterpret_cast<volatile int32_t*>(&r->complete) = 1;
  __threadfence_system();
}

TL_DEVICE void fill_report(WaitReport* r, int rank, int peer, int64_t slot, Cmp cmp, uint64_t expected,
                           uint64_t observed, uint64_t waited_ns, int64_t tile, const char* site) {
  r->rank = rank;
  r->slot = slot;
  r->tile = tile;
  r->expected = expected;
  r->observed = observed;
  r->cmp = static_cast<int32_t>(cmp);
  r->peer = peer;
  r->waited_ns = waited_ns;
  int i = 0;
  for (const char* s = site; s != nullptr && *s != '\0' && i + 1 < int(sizeof(r->site)); ++s) r->site[i++] = *s;
  r->site[i] = '\0';
  publish_report(r);
}

}  // namespace detail

// Records the first timeout of this rank in its WaitReport (host-mapped: the host names the op,
// rank, site, tile, slot, expected and observed value in its tilelink::Error), raises the abort of
// the current call on every rank, and returns: the caller stops waiting.
//
// No function call on this path, on purpose: a call anywhere in a kernel that also issues wgmma
// makes ptxas serialize every wgmma of that kernel (warning C7510), and device printf is a call
// (vprintf). So by default the device does not print; define TILELINK_DEVICE_PRINTF to also get
// a printf line per timed-out thread (debugging only, never in GEMM translation units).
TL_DEVICE void report_wait_timeout_at(const Team& t, int peer, int64_t slot, Cmp cmp, uint64_t expected,
                                      uint64_t observed, uint64_t waited_ns, int64_t tile, const char* site) {
  if (detail::claim_report(t.report))
    detail::fill_report(t.report, t.rank, peer, slot, cmp, expected, observed, waited_ns, tile, site);
#if defined(TILELINK_DEVICE_PRINTF)
  printf("tilelink: rank %d: %s timed out after %llu ms: tile %lld, signal slot %lld on rank %d: "
         "expected %s %llu, observed %llu (block %d, thread %d)\n",
         t.rank, site, (unsigned long long)(waited_ns / 1000000), (long long)tile, (long long)slot, peer,
         detail::cmp_name_device(cmp), (unsigned long long)expected, (unsigned long long)observed,
         int(blockIdx.x), int(threadIdx.x));
#endif
  detail::raise_abort(t, call_epoch(t));
}

// A kernel used a primitive wrongly (e.g. a staging buffer that is not shared memory): there is
// no sensible way to go on, so this records what was wrong (expected / observed as the caller
// says) and traps. Unlike a timeout this is a bug in the calling kernel, never a slow peer.
TL_DEVICE void report_misuse_and_trap(const Team& t, Cmp cmp, uint64_t expected, uint64_t observed,
                                      const char* what) {
  if (detail::claim_report(t.report))
    detail::fill_report(t.report, t.rank, -1, -1, cmp, expected, observed, 0, -1, what);
  __trap();
}

// Works out which rank and slot `sig` is (peer -1 / slot -1 when it is not a pool signal, e.g.
// an mbarrier in shared memory) and reports as above.
TL_DEVICE void report_wait_timeout(const Team& t, const void* sig, Cmp cmp, uint64_t expected,
                                   uint64_t observed, uint64_t waited_ns, WaitSite site) {
  const int peer = owner_of(t, sig);
  int64_t slot = -1;
  if (peer >= 0) {
    const uint64_t* pool = symm_at(t, t.signal_base, peer);
    const uint64_t* s = static_cast<const uint64_t*>(sig);
    if (s >= pool && s < pool + t.signal_slots) slot = s - pool;
  }
  report_wait_timeout_at(t, peer, slot, cmp, expected, observed, waited_ns, site.tile, site.name);
}

// Spins until `cmp(*sig, value)` holds, reading with acquire semantics (O = Order::relaxed for
// a wait that orders nothing, e.g. sync_all) at scope S, and returns the value that satisfied it.
// `sig` may be local or a peer's address (symm_at). Bounded by Team::wait_timeout_ns: on timeout
// it reports and raises the call's abort (see report_wait_timeout); once the call is aborted, on
// any rank, it returns the last value read, which does not satisfy the condition — the caller
// goes on without the data (its output is garbage, and the host raises an error for the call).
template <Scope S = Scope::sys, Order O = Order::acquire>
TL_DEVICE uint64_t signal_wait_until(const Team& t, const uint64_t* sig, Cmp cmp, uint64_t value,
                                     WaitSite site = {}) {
  static_assert(O == Order::acquire || O == Order::relaxed, "a wait is acquire or relaxed");
  uint64_t v = ld<O, S>(sig);
  if (compare(v, cmp, value)) return v;
  const uint64_t start = globaltimer();
  for (uint32_t i = 1;; ++i) {
    v = ld<O, S>(sig);
    if (compare(v, cmp, value)) return v;
    if ((i & 63u) == 0) {
      if (detail::call_aborted(t, call_epoch(t))) {
        detail::note_aborted(t);
        return v;
      }
      const uint64_t waited = globaltimer() - start;
      if (waited > t.wait_timeout_ns) {
        report_wait_timeout(t, sig, cmp, value, v, waited, site);
        return v;
      }
    }
  }
}

// The same bounded wait (>=, acquire, sys scope) for warps that run on a reduced register budget
// (a GEMM's producer warp after setmaxnreg.dec to 40 registers): its timeout path only stores
// values the caller already holds — the slot index of a local signal, the tile — and the site as
// constant words, so it needs a handful of registers. (The general path works out owner and slot
// and copies the site string; compiled into such a warp it used R41+ and faulted with "illegal
// instruction" instead of reporting.)
TL_DEVICE void report_wait_timeout_lean(const Team& t, int64_t slot, int64_t tile, uint64_t expected,
                                        uint64_t observed, uint64_t waited_ns, uint64_t site0, uint64_t site1,
                                        uint64_t site2) {
  WaitReport* r = t.report;
  if (detail::claim_report(r)) {
    r->rank = t.rank;
    r->peer = t.rank;
    r->slot = slot;
    r->tile = tile;
    r->expected = expected;
    r->observed = observed;
    r->cmp = static_cast<int32_t>(Cmp::ge);
    r->waited_ns = waited_ns;
    uint64_t* site = reinterpret_cast<uint64_t*>(r->site);
    site[0] = site0;
    site[1] = site1;
    site[2] = site2;
    site[3] = 0;
    detail::publish_report(r);
  }
  detail::raise_abort(t, expected);
}

// Up to 24 characters of a site name as three little-endian words (compile-time constants).
struct LeanSite {
  uint64_t w[3] = {0, 0, 0};
  constexpr LeanSite(const char* s) {
    for (int i = 0; i < 24 && s[i] != '\0'; ++i) w[i / 8] |= uint64_t(uint8_t(s[i])) << (8 * (i % 8));
  }
};

// Waits until this rank's local signal slot `slot` of `signals` holds >= `epoch`, the epoch of
// the current call (which is also what an abort of this call holds). Gives up like
// signal_wait_until on a timeout or an abort.
TL_DEVICE void signal_wait_local_lean(const Team& t, const uint64_t* signals, int64_t slot, uint64_t epoch,
                                      int64_t tile, const LeanSite site) {
  const uint64_t* sig = signals + slot;
  if (ld<Order::acquire, Scope::sys>(sig) >= epoch) return;
  const uint64_t start = globaltimer();
  for (uint32_t i = 1;; ++i) {
    const uint64_t v = ld<Order::acquire, Scope::sys>(sig);
    if (v >= epoch) return;
    if ((i & 63u) == 0) {
      if (detail::call_aborted(t, epoch)) {
        detail::note_aborted(t);
        return;
      }
      const uint64_t waited = globaltimer() - start;
      if (waited > t.wait_timeout_ns) {
        report_wait_timeout_lean(t, (sig - t.signal_base), tile, epoch, v, waited, site.w[0], site.w[1], site.w[2]);
        return;
      }
    }
  }
}

// Sets or adds `value` to the signal `sig` (a local symmetric address) on rank `peer`, with
// release semantics: every write this thread made before is visible to whoever acquires it.
template <Scope S = Scope::sys>
TL_DEVICE void signal_op(const Team& t, uint64_t* sig, uint64_t value, SignalOp op, int peer) {
  uint64_t* p = symm_at(t, sig, peer);
  if (op == SignalOp::set) st<Order::release, S>(p, value);
  else if (op == SignalOp::add) red_add<Order::release, S>(p, value);
  else red_max<Order::release, S>(p, value);
}

#endif  // __CUDACC__

}  // namespace tilelink::ll
