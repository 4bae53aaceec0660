// Forced missing notify: a wrong schedule must end in an error, not a hang.
//
// The parent test re-executes this binary as a child on LlForcedMissingNotifyChild.* with
// TILELINK_WAIT_TIMEOUT_MS=300: there rank 1 of a 2-rank world waits for a signal nobody sends
// (rank 0 notifies a neighbouring slot instead). The bounded wait reports and traps, which kills
// the CUDA context — hence the child process. The parent asserts the child ended non-zero within
// seconds, that its output names rank 1, the wait site, the tile, the signal slot and the
// expected/observed values, and that the host-side tilelink::Error names the op.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/ll.cuh"

namespace ll = tilelink::ll;
namespace tt = tilelink::test;
using tilelink::Context;

namespace {

constexpr const char* kChildFlag = "TILELINK_LL_TIMEOUT_CHILD";
constexpr const char* kOp = "ll_forced_missing_notify";
constexpr const char* kSite = "forced_missing_notify";
constexpr int64_t kTile = 7;

__global__ void missing_notify_kernel(ll::Team t, uint64_t* sigs) {
  if (threadIdx.x != 0) return;
  if (t.rank == 0) {
    // The bug under test: notify slot 1 on rank 1, while rank 1 waits on slot 2.
    ll::signal_op(t, &sigs[1], t.epoch, ll::SignalOp::set, 1);
  } else {
    ll::signal_wait_until(t, &sigs[2], ll::Cmp::ge, t.epoch, {kTile, kSite});
  }
}

TEST(LlForcedMissingNotifyChild, Rank1WaitsForASignalNobodySends) {
  if (!tt::env_flag(kChildFlag)) GTEST_SKIP() << "runs only as the child of LlForcedMissingNotify";
  tilelink::WorldOptions options;
  options.heap_bytes = 64u << 20;
  auto* world = new tilelink::InProcessWorld(2, options);  // never destroyed: the context dies
  int64_t slot = -1;
  uint64_t epoch = 0;
  std::string error;
  try {
    world->run([&](Context& ctx) {
      uint64_t* sigs = ctx.signal_alloc(4, "forced missing notify");
      const uint64_t e = ctx.begin_op(kOp);
      if (ctx.rank() == 1) {
        slot = (sigs + 2) - ctx.team().signal_base;
        epoch = e;
      }
      ctx.barrier();
      missing_notify_kernel<<<1, 32, 0, ctx.stream()>>>(ctx.team(), sigs);
      tt::check_launch(kOp);
      ctx.synchronize(kOp);
    });
  } catch (const tilelink::Error& e) {
    error = e.what();
  }
  const volatile ll::WaitReport* r = world->context(1).wait_report();
  char site[sizeof(r->site) + 1] = {};
  for (size_t i = 0; i < sizeof(r->site); ++i) site[i] = r->site[i];
  std::printf("CHILD_EXPECT slot=%lld expected=%llu\n", (long long)slot, (unsigned long long)epoch);
  std::printf("CHILD_REPORT failed=%d rank=%d site=%s tile=%lld slot=%lld peer=%d cmp=%d expected=%llu observed=%llu\n",
              int(r->failed), int(r->rank), site, (long long)r->tile, (long long)r->slot, int(r->peer),
              int(r->cmp), (unsigned long long)r->expected, (unsigned long long)r->observed);
  std::printf("CHILD_ERROR_BEGIN\n%s\nCHILD_ERROR_END\n", error.empty() ? "(no tilelink::Error was thrown)" : error.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  // Exit without destructors: the CUDA context is gone after the trap.
  std::_Exit(error.empty() ? 0 : 3);
}

std::string capture(const std::string& text, const std::string& pattern) {
  std::smatch m;
  const std::regex re(pattern);
  return std::regex_search(text, m, re) && m.size() > 1 ? m[1].str() : std::string();
}

TEST(LlForcedMissingNotify, EndsInAnErrorNotAHang) {
  if (tt::env_flag(kChildFlag)) GTEST_SKIP() << "this is the child";
  const tt::ChildResult c = tt::run_self_as_child("LlForcedMissingNotifyChild.*",
                                                  {{kChildFlag, "1"}, {"TILELINK_WAIT_TIMEOUT_MS", "300"}},
                                                  /*timeout_s=*/60);
  SCOPED_TRACE("child output:\n" + c.output);
  ASSERT_TRUE(c.started);
  ASSERT_FALSE(c.timed_out) << "the child hung: the missing notify was not turned into an error";
  EXPECT_NE(c.exit_code, 0) << "the child exited 0: no error for a wait nobody satisfies";
  EXPECT_EQ(c.term_signal, 0) << "the child died of a signal instead of reporting";
  EXPECT_LT(c.seconds, 15.0) << "a 300 ms wait bound took " << c.seconds << " s to end the child";
  std::printf("child ended in %.2f s with exit code %d\n", c.seconds, c.exit_code);

  const std::string slot = capture(c.output, "CHILD_EXPECT slot=(-?[0-9]+)");
  const std::string expected = capture(c.output, "CHILD_EXPECT slot=-?[0-9]+ expected=([0-9]+)");
  ASSERT_FALSE(slot.empty());
  ASSERT_NE(slot, "-1");
  ASSERT_FALSE(expected.empty());

  // The wait report (host-mapped, read by the child after the failure).
  EXPECT_NE(c.output.find("CHILD_REPORT failed=1 rank=1 site=" + std::string(kSite) + " tile=7 slot=" + slot +
                          " peer=1 cmp=2 expected=" + expected + " observed=0"),
            std::string::npos)
      << "the wait report does not hold rank 1, the site, tile 7, slot " << slot << ", expected " << expected
      << ", observed 0";

  // The host-side error: names the op and the failed wait with all its facts.
  const std::string error = capture(c.output, "CHILD_ERROR_BEGIN\\n([\\s\\S]*)\\nCHILD_ERROR_END");
  ASSERT_FALSE(error.empty());
  EXPECT_NE(error.find(kOp), std::string::npos) << "the error does not name the op";
  EXPECT_NE(error.find("rank 1"), std::string::npos) << "the error does not name rank 1";
  EXPECT_NE(error.find(kSite), std::string::npos) << "the error does not name the wait site";
  EXPECT_NE(error.find("tile 7"), std::string::npos) << "the error does not name the tile";
  EXPECT_NE(error.find("slot " + slot), std::string::npos) << "the error does not name the signal slot";
  EXPECT_NE(error.find(expected), std::string::npos) << "the error does not give the expected value";
  EXPECT_NE(error.find("observed 0"), std::string::npos) << "the error does not give the observed value";
}

}  // namespace
