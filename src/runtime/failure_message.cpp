#include "failure_message.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <sstream>

#include "tilelink/ll/signal.cuh"

namespace tilelink {

std::string describe_wait(const ll::WaitReport& r) {
  // The site is written by the device; never trust it to be terminated.
  const std::string site(r.site, strnlen(r.site, sizeof(r.site)));
  std::ostringstream os;
  os << "rank " << r.rank << ": " << (site.empty() ? "wait" : site) << " timed out after "
     << r.waited_ns / 1000000 << " ms";
  if (r.tile >= 0) os << " waiting for tile " << r.tile;
  os << (r.tile >= 0 ? ", " : " on ");
  if (r.slot >= 0) os << "signal slot " << r.slot;
  else os << "a signal outside the pool";
  if (r.peer >= 0) os << " of rank " << r.peer;
  else os << " (not in any rank's heap)";
  const auto cmp = static_cast<ll::Cmp>(r.cmp);
  os << ": expected " << ll::cmp_name(cmp) << " " << r.expected << ", observed " << r.observed;
  return os.str();
}

std::string aborted_call_text(int raiser, bool refused) {
  std::ostringstream os;
  if (refused) {
    os << "rank " << raiser << " refused this call (its own error says why: its input, or its host"
       << " could not make the call) after the others had begun it";
  } else {
    os << "a bounded wait timed out";
    if (raiser >= 0) os << " on rank " << raiser;
  }
  os << ", so every wait of this call gave up, on every rank: its outputs are not valid. The world "
        "stays usable: later calls run normally";
  return os.str();
}

std::string failure_message(const OpFailure& f, const std::vector<ll::WaitReport>& reports,
                            const std::vector<RankProgress>& progress) {
  std::ostringstream os;
  os << "tilelink: op '" << f.op << "' (call " << f.epoch << ") failed on rank " << f.rank;
  if (f.device >= 0) os << " (GPU " << f.device << ")";
  os << ": " << f.error_name << ": " << f.error_text;
  std::vector<ll::WaitReport> failed;
  for (const auto& r : reports)
    if (r.failed != 0) failed.push_back(r);
  std::sort(failed.begin(), failed.end(),
            [](const ll::WaitReport& a, const ll::WaitReport& b) { return a.rank < b.rank; });
  for (const auto& r : failed) os << "\n  bounded wait timed out on " << describe_wait(r);
  if (failed.empty())
    os << "\n  (no bounded wait reported a timeout on the ranks visible here; if a peer process "
          "failed, its own error names the wait)";
  else
    os << "\n  a signal that never arrived means a producer did not notify, or notified a "
          "different slot or epoch; raise TILELINK_WAIT_TIMEOUT_MS only if the work is just slow";
  if (progress.size() > 1) {
    std::vector<RankProgress> sorted = progress;
    std::sort(sorted.begin(), sorted.end(), [](const RankProgress& a, const RankProgress& b) { return a.rank < b.rank; });
    os << "\n  host progress (the last stage each rank enqueued):";
    for (const auto& p : sorted) {
      os << "\n    rank " << p.rank << ": ";
      if (p.epoch == 0) os << "no op call yet";
      else os << "call " << p.epoch << " (" << p.op << "): " << p.stage;
      if (p.epoch != 0 && p.stage_age_ms >= 0) os << ", " << p.stage_age_ms << " ms ago";
    }
  }
  return os.str();
}

ll::WaitReport snapshot(const volatile ll::WaitReport* report) {
  ll::WaitReport copy{};
  std::atomic_thread_fence(std::memory_order_acquire);
  // Byte-wise through volatile: the device wrote it, the compiler must not cache any of it.
  auto src = reinterpret_cast<const volatile unsigned char*>(report);
  auto dst = reinterpret_cast<unsigned char*>(&copy);
  for (size_t i = 0; i < sizeof(copy); ++i) dst[i] = src[i];
  return copy;
}

}  // namespace tilelink
