// What the user reads when an op fails: the op, the rank, the CUDA error and every timed-out wait.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/failure_message.hpp"
#include "tilelink/ll/signal.cuh"

namespace tilelink {
namespace {

ll::WaitReport timed_out(int rank, const char* site, int64_t tile, int64_t slot, int peer,
                         uint64_t expected, uint64_t observed) {
  ll::WaitReport r{};
  r.failed = 1;
  r.rank = rank;
  r.tile = tile;
  r.slot = slot;
  r.peer = peer;
  r.expected = expected;
  r.observed = observed;
  r.cmp = int32_t(ll::Cmp::ge);
  r.waited_ns = 5000ull * 1000000;
  std::strncpy(r.site, site, sizeof(r.site) - 1);
  return r;
}

OpFailure launch_failure() {
  OpFailure f;
  f.op = "ag_gemm";
  f.epoch = 42;
  f.rank = 1;
  f.device = 0;
  f.error_name = "cudaErrorLaunchFailure";
  f.error_text = "unspecified launch failure";
  return f;
}

TEST(FailureMessage, DescribeWaitHasEveryField) {
  const std::string s = describe_wait(timed_out(1, "consumer_tile_wait", 3, 17, 0, 5, 4));
  EXPECT_EQ(s,
            "rank 1: consumer_tile_wait timed out after 5000 ms waiting for tile 3, signal slot 17"
            " of rank 0: expected >= 5, observed 4");
}

TEST(FailureMessage, DescribeWaitWithoutTileOrSlot) {
  ll::WaitReport r = timed_out(2, "barrier_all", -1, -1, -1, 9, 8);
  r.cmp = int32_t(ll::Cmp::eq);
  EXPECT_EQ(describe_wait(r),
            "rank 2: barrier_all timed out after 5000 ms on a signal outside the pool (not in any "
            "rank's heap): expected == 9, observed 8");
}

TEST(FailureMessage, UnterminatedSiteIsCutAtItsField) {
  ll::WaitReport r = timed_out(0, "", 1, 1, 0, 1, 0);
  std::memset(r.site, 'x', sizeof(r.site));  // no terminating zero
  const std::string s = describe_wait(r);
  EXPECT_NE(s.find(std::string(sizeof(r.site), 'x') + " timed out"), std::string::npos) << s;
}

TEST(FailureMessage, NamesOpRankErrorAndEveryFailedWaitInRankOrder) {
  std::vector<ll::WaitReport> reports = {timed_out(3, "peer_tile_wait", 7, 2, 1, 10, 9),
                                         ll::WaitReport{},  // rank without a timeout
                                         timed_out(1, "consumer_tile_wait", 3, 17, 0, 5, 4)};
  const std::string msg = failure_message(launch_failure(), reports);
  EXPECT_EQ(msg.rfind("tilelink: op 'ag_gemm' (call 42) failed on rank 1 (GPU 0): "
                      "cudaErrorLaunchFailure: unspecified launch failure", 0), 0u) << msg;
  const size_t first = msg.find("timed out on rank 1: consumer_tile_wait");
  const size_t second = msg.find("timed out on rank 3: peer_tile_wait");
  ASSERT_NE(first, std::string::npos) << msg;
  ASSERT_NE(second, std::string::npos) << msg;
  EXPECT_LT(first, second);
  EXPECT_NE(msg.find("expected >= 5, observed 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tile 7, signal slot 2 of rank 1: expected >= 10, observed 9"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("TILELINK_WAIT_TIMEOUT_MS"), std::string::npos) << msg;
}

TEST(FailureMessage, SaysSoWhenNoWaitTimedOut) {
  const std::string msg = failure_message(launch_failure(), {ll::WaitReport{}});
  EXPECT_NE(msg.find("no bounded wait reported a timeout"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("timed out on rank"), std::string::npos) << msg;
}

// Which rank's host never enqueued what its peers wait for: every rank's last stage, in rank order.
TEST(FailureMessage, ListsEachRanksHostProgress) {
  const std::vector<RankProgress> progress = {{2, 127, "ag_gemm", "checked, buffers ready", 5012},
                                              {0, 127, "ag_gemm", "GEMM enqueued"},
                                              {1, 0, "", ""}};
  const std::string msg =
      failure_message(launch_failure(), {timed_out(0, "rank_wait", 2, 10, 0, 127, 125)}, progress);
  const size_t r0 = msg.find("rank 0: call 127 (ag_gemm): GEMM enqueued\n");
  const size_t r1 = msg.find("rank 1: no op call yet");
  // How long ago: rank 2's host has been in its enqueues for as long as the wait's bound.
  const size_t r2 = msg.find("rank 2: call 127 (ag_gemm): checked, buffers ready, 5012 ms ago");
  ASSERT_NE(msg.find("host progress"), std::string::npos) << msg;
  ASSERT_NE(r0, std::string::npos) << msg;
  ASSERT_NE(r1, std::string::npos) << msg;
  ASSERT_NE(r2, std::string::npos) << msg;
  EXPECT_LT(r0, r1);
  EXPECT_LT(r1, r2);
  // One rank (a process of a multi-process world) sees only itself: nothing to compare.
  EXPECT_EQ(failure_message(launch_failure(), {}, {progress[0]}).find("host progress"), std::string::npos);
}

TEST(FailureMessage, AnAbortedCallNamesTheRankWhoseWaitTimedOut) {
  OpFailure f = launch_failure();
  f.error_name = "call aborted";
  f.error_text = aborted_call_text(3);
  // A process of a multi-process world: the timed-out wait was on a peer it cannot see.
  const std::string msg = failure_message(f, {ll::WaitReport{}});
  EXPECT_NE(msg.find("op 'ag_gemm' (call 42) failed on rank 1 (GPU 0): call aborted: a bounded wait timed "
                     "out on rank 3"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("outputs are not valid"), std::string::npos) << msg;
  EXPECT_NE(msg.find("later calls run normally"), std::string::npos) << msg;
  EXPECT_NE(msg.find("its own error names the wait"), std::string::npos) << msg;
  EXPECT_EQ(aborted_call_text(-1).find("on rank"), std::string::npos);
}

TEST(FailureMessage, SnapshotCopiesEveryByte) {
  const ll::WaitReport r = timed_out(5, "rank_wait", 11, 12, 6, 13, 14);
  const ll::WaitReport copy = snapshot(&r);
  EXPECT_EQ(std::memcmp(&r, &copy, sizeof r), 0);
}

}  // namespace
}  // namespace tilelink
