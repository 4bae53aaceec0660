// tilelink/ll/flagged.cuh — flagged words: data and its flag in one store (the low-latency protocol).
//
// A flagged word is 64 bits: 32 bits of data below, a 32-bit flag above. One aligned 64-bit store
// is single-copy atomic, so a reader that sees the flag it expects also sees the data written with
// it: no separate signal, no fence, no release/acquire pair per message — one NVLink write per word
// instead of data, fence and flag. The price is twice the bytes on the wire, which small messages
// (up to ~1 MB) do not feel; their cost is latency.
//
//   st_flagged2(dst, data, flag)        two words (8 bytes of data) in one 16-byte store; each
//                                       64-bit half is atomic on its own, and carries its flag
//   ld_flagged2_wait(t, src, flag, ...) polls those two words until both carry `flag`, returns the
//                                       8 bytes of data; bounded like signal_wait_until (timeout,
//                                       then the call's abort), giving up returns what it read
//
// Flags are the low 32 bits of the call's epoch, so a word left by an earlier call never matches
// a later one and the buffer never needs a reset (a zeroed buffer matches no call: epochs start
// at 1). A receive buffer may be rewritten by the next call while a slow reader is still on it,
// so a protocol using it alternates two buffers by epoch parity (see ops/allgather_ll).
// Scope: relaxed sys (volatile-strength) loads and stores — the flag orders nothing else.
#pragma once

#include <cstdint>

#include "tilelink/ll/signal.cuh"
#include "tilelink/ll/team.cuh"
#include "tilelink/ll/timer.cuh"

namespace tilelink::ll {

#if defined(__CUDACC__)

TL_DEVICE uint64_t flagged(uint32_t data, uint32_t flag) { return uint64_t(data) | (uint64_t(flag) << 32); }

// `dst` 16-byte aligned; may be a peer's address (symm_at).
TL_DEVICE void st_flagged2(uint64_t* dst, uint2 data, uint32_t flag) {
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(dst), "l"(flagged(data.x, flag)),
               "l"(flagged(data.y, flag))
               : "memory");
}

TL_DEVICE void ld_flagged2(const uint64_t* src, uint64_t& w0, uint64_t& w1) {
  asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(w0), "=l"(w1) : "l"(src) : "memory");
}

// Waits until both words at `src` (16-byte aligned, local) carry `flag`; returns their data.
// Gives up like signal_wait_until — on a timeout (reported with `site`, expected = flag,
// observed = the flag last seen) or once the call is aborted — returning what it read.
TL_DEVICE uint2 ld_flagged2_wait(const Team& t, const uint64_t* src, uint32_t flag, WaitSite site) {
  uint64_t w0, w1;
  ld_flagged2(src, w0, w1);
  if (uint32_t(w0 >> 32) == flag && uint32_t(w1 >> 32) == flag) return make_uint2(uint32_t(w0), uint32_t(w1));
  const uint64_t start = globaltimer();
  for (uint32_t i = 1;; ++i) {
    ld_flagged2(src, w0, w1);
    if (uint32_t(w0 >> 32) == flag && uint32_t(w1 >> 32) == flag) break;
    if ((i & 63u) == 0) {
      if (detail::call_aborted(t, call_epoch(t))) {
        detail::note_aborted(t);
        break;
      }
      const uint64_t waited = globaltimer() - start;
      if (waited > t.wait_timeout_ns) {
        const uint64_t seen = uint32_t(w0 >> 32) != flag ? (w0 >> 32) : (w1 >> 32);
        report_wait_timeout_at(t, t.rank, -1, Cmp::eq, flag, seen, waited, site.tile, site.name);
        break;
      }
    }
  }
  return make_uint2(uint32_t(w0), uint32_t(w1));
}

#endif  // __CUDACC__

}  // namespace tilelink::ll
