// Turning a failed op call into the message of a tilelink::Error. Pure (no CUDA calls), so the
// wording is tested on the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilelink/ll/team.cuh"

namespace tilelink {

// One line about a timed-out wait: "rank 1: consumer_tile_wait timed out after 5000 ms waiting
// for tile 3, signal slot 17 on rank 0: expected >= 5, observed 4".
std::string describe_wait(const ll::WaitReport& report);

struct OpFailure {
  std::string op;          // the op whose launch or sync failed
  uint64_t epoch = 0;      // its call number
  int rank = -1, device = -1;
  std::string error_name;  // cudaGetErrorName
  std::string error_text;  // cudaGetErrorString
};

// Where a rank's host thread last was: the call it last began, the last stage of it that it
// enqueued (Context::trace), and how long ago it got there. A rank whose host never enqueued what
// its peers wait for shows here; the age tells a host stuck in its own enqueues (a stage reached
// as long ago as the wait's bound) from one that finished them and returned.
struct RankProgress {
  int rank = -1;
  uint64_t epoch = 0;  // 0: no op call began yet
  std::string op, stage;
  int64_t stage_age_ms = -1;  // < 0: not known
};

// The error text of a call that a timed-out wait aborted (raised by rank `raiser`; -1: unknown).
std::string aborted_call_text(int raiser, bool refused = false);

// The whole message: what failed where, then every wait report with failed != 0 (in rank order),
// or a hint when no wait timed out, then each rank's host progress when there is more than one.
std::string failure_message(const OpFailure& failure, const std::vector<ll::WaitReport>& reports,
                            const std::vector<RankProgress>& progress = {});

// Copies a report the device may have written (host-mapped memory) into a plain value.
ll::WaitReport snapshot(const volatile ll::WaitReport* report);

}  // namespace tilelink
