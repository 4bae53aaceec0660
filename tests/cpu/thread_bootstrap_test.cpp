// The in-process world's host collectives, on plain threads: barrier, allgather, abort, timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/thread_bootstrap.hpp"

namespace tilelink {
namespace {

using namespace std::chrono_literals;

// Runs fn on every rank and returns the message of what run_spmd rethrew ("" if nothing).
std::string run_and_catch(ThreadGroup& g, const std::function<void(int)>& fn) {
  try {
    run_spmd(g, fn);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ThreadBootstrap, BarrierSeparatesPhases) {
  constexpr int kRanks = 8, kPhases = 200;
  ThreadGroup g(kRanks, 10s);
  std::atomic<int> arrived{0};
  std::atomic<bool> ok{true};
  run_spmd(g, [&](int r) {
    ThreadBootstrap b(g, r);
    for (int phase = 0; phase < kPhases; ++phase) {
      arrived.fetch_add(1);
      b.barrier();
      // Everyone has arrived at this phase, nobody can be past the next barrier yet.
      const int seen = arrived.load();
      if (seen < (phase + 1) * kRanks || seen > (phase + 2) * kRanks) ok = false;
      b.barrier();
    }
  });
  EXPECT_TRUE(ok);
  EXPECT_EQ(arrived.load(), kRanks * kPhases);
}

TEST(ThreadBootstrap, AllgatherReturnsEveryRanksDataInRankOrder) {
  constexpr int kRanks = 5, kRounds = 300;
  ThreadGroup g(kRanks, 10s);
  std::atomic<int> wrong{0};
  run_spmd(g, [&](int r) {
    ThreadBootstrap b(g, r);
    EXPECT_EQ(b.rank(), r);
    EXPECT_EQ(b.size(), kRanks);
    for (int round = 0; round < kRounds; ++round) {
      // Back-to-back allgathers with no barrier between: the double buffer must keep them apart.
      const uint64_t mine[2] = {uint64_t(round) * 1000 + r, uint64_t(r)};
      uint64_t all[kRanks][2];
      b.allgather(mine, all, sizeof mine);
      for (int p = 0; p < kRanks; ++p)
        if (all[p][0] != uint64_t(round) * 1000 + p || all[p][1] != uint64_t(p)) ++wrong;
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadBootstrap, AllgatherOfDifferentSizesIsAnError) {
  ThreadGroup g(2, 10s);
  const std::string msg = run_and_catch(g, [&](int r) {
    ThreadBootstrap b(g, r);
    char mine[16] = {}, all[32];
    b.allgather(mine, all, r == 0 ? 8 : 16);
  });
  EXPECT_NE(msg.find("allgather"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the ranks did not make the same collective calls"), std::string::npos) << msg;
}

TEST(ThreadBootstrap, AFailingRankReleasesTheOthersAndItsErrorIsRethrown) {
  ThreadGroup g(4, 60s);
  std::atomic<int> released{0};
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = run_and_catch(g, [&](int r) {
    ThreadBootstrap b(g, r);
    if (r == 2) {
      std::this_thread::sleep_for(50ms);  // let the others block in the barrier first
      throw Error("shape mismatch on rank 2");
    }
    try {
      b.barrier();
    } catch (const PeerFailed& e) {
      EXPECT_EQ(e.failed_rank(), 2);
      EXPECT_EQ(std::string(e.what()), "rank 2 failed: shape mismatch on rank 2");
      ++released;
      throw;
    }
  });
  EXPECT_EQ(msg, "shape mismatch on rank 2") << "the root cause, not a PeerFailed";
  EXPECT_EQ(released.load(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "released at once, not by timeout";
}

TEST(ThreadBootstrap, RanksArrivingAfterAFailureFailToo) {
  ThreadGroup g(3, 60s);
  std::atomic<int> late{0};
  const std::string msg = run_and_catch(g, [&](int r) {
    ThreadBootstrap b(g, r);
    if (r == 0) throw std::runtime_error("cudaMalloc failed");
    while (!g.aborted()) std::this_thread::sleep_for(1ms);
    try {
      uint64_t x = 1, all[3];
      b.allgather(&x, all, sizeof x);
    } catch (const PeerFailed& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 failed: cudaMalloc failed"), std::string::npos);
      ++late;
    }
  });
  EXPECT_EQ(msg, "cudaMalloc failed");
  EXPECT_EQ(late.load(), 2);
}

TEST(ThreadBootstrap, BarrierTimesOutNamingTheMissingRanks) {
  ThreadGroup g(4, 200ms);
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = run_and_catch(g, [&](int r) {
    ThreadBootstrap b(g, r);
    if (r == 1 || r == 3) return;  // skips the collective
    b.barrier();
  });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(msg.find("host barrier timed out after 200 ms"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank(s) 1 3 did not arrive"), std::string::npos) << msg;
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 5s);
}

TEST(ThreadBootstrap, AWorldIsUsableAgainAfterAFailedRun) {
  ThreadGroup g(3, 10s);
  EXPECT_EQ(run_and_catch(g, [&](int r) {
              if (r == 1) throw Error("bad input");
              ThreadBootstrap(g, r).barrier();
            }),
            "bad input");
  std::atomic<int> sum{0};
  EXPECT_EQ(run_and_catch(g, [&](int r) {
              ThreadBootstrap b(g, r);
              int all[3];
              b.allgather(&r, all, sizeof r);
              b.barrier();
              sum += all[0] + all[1] + all[2];
            }),
            "");
  EXPECT_EQ(sum.load(), 3 * (0 + 1 + 2));
}

TEST(ThreadBootstrap, EveryRankThreadKnowsItsRank) {
  ThreadGroup g(4, 10s);
  std::atomic<int> wrong{0};
  run_spmd(g, [&](int r) {
    if (detail::thread_rank() != r) ++wrong;
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadBootstrap, NonStandardExceptionsAreStillRootCauses) {
  ThreadGroup g(2, 10s);
  EXPECT_THROW(run_spmd(g, [&](int r) {
                 if (r == 0) throw 42;
                 ThreadBootstrap(g, r).barrier();
               }),
               int);
}

TEST(ThreadBootstrap, GroupNeedsARank) { EXPECT_THROW(ThreadGroup(0, 1s), Error); }

}  // namespace
}  // namespace tilelink
