// A wait nobody satisfies must end in an error, not a hang — and not a dead process: the world
// goes on working.
//
// In a world of n ranks, the last rank waits for a signal nobody sends (rank 0 notifies a
// neighbouring slot instead) with a 300 ms bound; every other rank waits for a signal that never
// comes either, but with a 60 s bound, so only the world's abort can end its wait early. The test
// asserts that every rank's synchronize raises within seconds — the waiting rank's error naming
// the op, itself, the wait site, the tile, the signal slot and the expected/observed values; the
// others' saying which rank's wait aborted the call — and then that 100 correct calls run on the
// same world.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/ll.cuh"

namespace ll = tilelink::ll;
namespace tt = tilelink::test;
using tilelink::Context;

namespace {

constexpr const char* kOp = "ll_forced_missing_notify";
constexpr const char* kSite = "forced_missing_notify";
constexpr int64_t kTile = 7;

// faulty: the missing notify; otherwise a ring (each rank notifies the next and waits for the
// previous), which must work again after the fault.
__global__ void notify_kernel(ll::Team t, uint64_t* sigs, bool faulty, uint64_t* observed) {
  if (threadIdx.x != 0) return;
  const uint64_t e = ll::call_epoch(t);
  const int victim = t.num_ranks - 1;
  if (faulty) {
    if (t.rank == victim) {
      ll::signal_wait_until(t, &sigs[2], ll::Cmp::ge, e, {kTile, kSite});
    } else {
      // The bug under test: notify slot 1 on the victim, while it waits on slot 2.
      if (t.rank == 0) ll::signal_op(t, &sigs[1], e, ll::SignalOp::set, victim);
      ll::signal_wait_until(t, &sigs[3], ll::Cmp::ge, e, {kTile, "never_sent"});
    }
    return;
  }
  ll::signal_op(t, &sigs[4], e, ll::SignalOp::max, (t.rank + 1) % t.num_ranks);
  *observed = ll::signal_wait_until(t, &sigs[4], ll::Cmp::ge, e, {0, "ring"});
}

class LlForcedMissingNotify : public ::testing::TestWithParam<int> {};

TEST_P(LlForcedMissingNotify, EndsInAnErrorOnEveryRankAndTheWorldStaysUsable) {
  const int n = GetParam();
  tilelink::WorldOptions options;
  options.heap_bytes = 64u << 20;
  tilelink::InProcessWorld world(n, options);
  std::vector<std::string> errors(n);
  std::vector<int64_t> victim_slot(n, -1);
  std::vector<uint64_t> epochs(n, 0);
  std::vector<ll::WaitReport> reports(n);
  std::vector<int> bad_calls(n, 0);
  std::vector<std::string> later_errors(n);
  double fault_seconds = 0;
  world.run([&](Context& ctx) {
    const int r = ctx.rank();
    const bool victim = r == n - 1;
    ctx.set_wait_timeout_ms(victim ? 300 : 60000);
    uint64_t* sigs = ctx.signal_alloc(8, "forced missing notify");
    uint64_t* observed = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&observed, sizeof(uint64_t)));
    victim_slot[r] = (sigs + 2) - ctx.team().signal_base;
    ctx.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    epochs[r] = ctx.begin_op(kOp);
    notify_kernel<<<1, 32, 0, ctx.stream()>>>(ctx.team(), sigs, true, observed);
    tt::check_launch(kOp);
    try {
      ctx.synchronize(kOp);
    } catch (const tilelink::Error& e) {
      errors[r] = e.what();
    }
    reports[r] = *ctx.wait_report();
    if (victim) fault_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ctx.barrier();
    ctx.set_wait_timeout_ms(5000);
    // The same world, 100 correct calls.
    try {
      for (int i = 0; i < 100; ++i) {
        const uint64_t e = ctx.begin_op("ll_ring");
        tt::poison_device(observed, sizeof(uint64_t), 0xff, ctx.stream());
        notify_kernel<<<1, 32, 0, ctx.stream()>>>(ctx.team(), sigs, false, observed);
        tt::check_launch("ll_ring");
        ctx.synchronize("ll_ring");
        // The previous rank may already be one call ahead (it notifies before it waits).
        const uint64_t seen = tt::download_n(observed, 1, ctx.stream())[0];
        if (seen != e && seen != e + 1) ++bad_calls[r];
      }
    } catch (const tilelink::Error& e) {
      later_errors[r] = e.what();
    }
    TL_CUDA_CHECK(cudaFree(observed));
  });

  const int v = n - 1;
  EXPECT_LT(fault_seconds, 10.0) << "a 300 ms wait bound took " << fault_seconds << " s to end the call";
  // The victim: its own wait, with every fact.
  const ll::WaitReport& r = reports[v];
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.rank, v);
  EXPECT_EQ(std::string(r.site), kSite);
  EXPECT_EQ(r.tile, kTile);
  EXPECT_EQ(r.slot, victim_slot[v]);
  EXPECT_EQ(r.peer, v);
  EXPECT_EQ(r.expected, epochs[v]);
  EXPECT_EQ(r.observed, 0u);
  const std::string& error = errors[v];
  SCOPED_TRACE("victim's error:\n" + error);
  EXPECT_NE(error.find(kOp), std::string::npos) << "the error does not name the op";
  EXPECT_NE(error.find("rank " + std::to_string(v)), std::string::npos) << "the error does not name the rank";
  EXPECT_NE(error.find(kSite), std::string::npos) << "the error does not name the wait site";
  EXPECT_NE(error.find("tile 7"), std::string::npos) << "the error does not name the tile";
  EXPECT_NE(error.find("slot " + std::to_string(victim_slot[v])), std::string::npos) << "no signal slot";
  EXPECT_NE(error.find("expected >= " + std::to_string(epochs[v])), std::string::npos) << "no expected value";
  EXPECT_NE(error.find("observed 0"), std::string::npos) << "the error does not give the observed value";
  // Every other rank: its 60 s wait gave up because of the abort, and it raised too.
  for (int q = 0; q < v; ++q) {
    SCOPED_TRACE("rank " + std::to_string(q) + "'s error:\n" + errors[q]);
    EXPECT_EQ(reports[q].failed, 0) << "rank " << q << " timed out itself instead of following the abort";
    EXPECT_EQ(reports[q].aborted, 1);
    EXPECT_NE(errors[q].find("call aborted"), std::string::npos);
    EXPECT_NE(errors[q].find("timed out on rank " + std::to_string(v)), std::string::npos);
    EXPECT_NE(errors[q].find(kSite), std::string::npos) << "an in-process rank sees the victim's report";
  }
  for (int q = 0; q < n; ++q) {
    EXPECT_EQ(later_errors[q], "") << "rank " << q << ": a call after the fault failed";
    EXPECT_EQ(bad_calls[q], 0) << "rank " << q << ": calls after the fault saw the wrong signal";
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, LlForcedMissingNotify, ::testing::Values(2, 3), tt::world_size_name);

}  // namespace
