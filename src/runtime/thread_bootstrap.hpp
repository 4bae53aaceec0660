// Collectives among the threads of one process (the ranks of an InProcessWorld). No CUDA here:
// the barrier, allgather, abort and timeout logic are tested on the CPU.
//
// Two properties users rely on (no silent hang):
// - abortable: when one rank fails, the ranks blocked in (or later entering) a barrier get an
//   Error "rank X failed: ..." instead of waiting forever for it;
// - bounded: a barrier that some rank never reaches fails after a timeout, naming those ranks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "tilelink/runtime/context.hpp"

namespace tilelink {

// Thrown in a rank that was released because *another* rank failed; the root cause is elsewhere.
class PeerFailed : public Error {
 public:
  PeerFailed(int failed_rank, const std::string& what);
  int failed_rank() const { return failed_rank_; }

 private:
  int failed_rank_;
};

// The state all threads of one world share.
class ThreadGroup {
 public:
  ThreadGroup(int size, std::chrono::milliseconds barrier_timeout);

  int size() const { return size_; }
  void barrier(int rank);
  void allgather(int rank, const void* mine, void* all, size_t bytes);
  // Marks the group failed by `rank` (the first call wins) and wakes every waiter.
  void abort(int rank, const std::string& why);
  bool aborted() const;
  // Clears a failure so the world can run again; only while no thread is inside the group.
  void reset();

 private:
  // Waits for the current generation to complete; the caller holds `lock` and has arrived.
  void wait_for_generation(std::unique_lock<std::mutex>& lock, int rank, uint64_t generation);
  [[noreturn]] void throw_aborted() const;

  const int size_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_count_ = 0;
  std::vector<bool> arrived_;
  bool aborted_ = false;
  int failed_rank_ = -1;
  std::string failure_;
  // Allgather data, double-buffered by the parity of each rank's allgather count: a rank can
  // only write buffer p again after every rank has passed the barrier between, i.e. read it.
  std::vector<std::vector<char>> slots_[2];
  std::vector<uint64_t> allgathers_;
};

class ThreadBootstrap final : public Bootstrap {
 public:
  ThreadBootstrap(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  void allgather(const void* mine, void* all, size_t bytes) override {
    group_.allgather(rank_, mine, all, bytes);
  }
  void barrier() override { group_.barrier(rank_); }

 private:
  ThreadGroup& group_;
  int rank_;
};

// Runs fn(rank) on one thread per rank of `group` and joins them all. The first rank to throw
// aborts the group (releasing the others); after the join, the first root-cause exception (one
// that is not PeerFailed) is rethrown. The group is reset first, so a world survives an error.
void run_spmd(ThreadGroup& group, const std::function<void(int rank)>& fn);

}  // namespace tilelink
