#include "thread_bootstrap.hpp"

#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

namespace tilelink {

PeerFailed::PeerFailed(int failed_rank, const std::string& what)
    : Error(what), failed_rank_(failed_rank) {}

ThreadGroup::ThreadGroup(int size, std::chrono::milliseconds barrier_timeout)
    : size_(size), timeout_(barrier_timeout), arrived_(size, false), allgathers_(size, 0) {
  TL_REQUIRE(size >= 1, "thread bootstrap: a world needs at least one rank, got ", size);
  slots_[0].resize(size);
  slots_[1].resize(size);
}

void ThreadGroup::throw_aborted() const {
  std::ostringstream os;
  os << "rank " << failed_rank_ << " failed: " << failure_;
  throw PeerFailed(failed_rank_, os.str());
}

void ThreadGroup::barrier(int rank) {
  std::unique_lock lock(mutex_);
  if (aborted_) throw_aborted();
  arrived_[rank] = true;
  if (++arrived_count_ == size_) {
    arrived_count_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    ++generation_;
    cv_.notify_all();
    return;
  }
  wait_for_generation(lock, rank, generation_);
}

void ThreadGroup::wait_for_generation(std::unique_lock<std::mutex>& lock, int rank,
                                      uint64_t generation) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  bool done = cv_.wait_until(lock, deadline,
                             [&] { return generation_ != generation || aborted_; });
  if (generation_ != generation) return;  // completed, even if an abort came right after
  if (done) throw_aborted();
  // Timed out: this rank is the one that noticed, so its error is a root cause. Abort the group
  // so the ranks still waiting, and the missing ones when they arrive, fail too.
  std::ostringstream os;
  os << "host barrier timed out after " << timeout_.count() << " ms on rank " << rank
     << ": rank(s)";
  for (int r = 0; r < size_; ++r)
    if (!arrived_[r]) os << " " << r;
  os << " did not arrive (a rank is stuck, or the ranks did not make the same collective calls;"
        " TILELINK_BARRIER_TIMEOUT_MS sets the bound)";
  if (!aborted_) {
    aborted_ = true;
    failed_rank_ = rank;
    failure_ = os.str();
    cv_.notify_all();
  }
  throw Error(os.str());
}

void ThreadGroup::allgather(int rank, const void* mine, void* all, size_t bytes) {
  const int parity = int(allgathers_[rank]++ & 1);
  {
    std::lock_guard lock(mutex_);
    if (aborted_) throw_aborted();
    auto& slot = slots_[parity][rank];
    slot.assign(static_cast<const char*>(mine), static_cast<const char*>(mine) + bytes);
  }
  barrier(rank);
  std::lock_guard lock(mutex_);
  for (int r = 0; r < size_; ++r) {
    const auto& slot = slots_[parity][r];
    TL_REQUIRE(slot.size() == bytes, "allgather: rank ", rank, " contributed ", bytes,
               " bytes but rank ", r, " contributed ", slot.size(),
               " (the ranks did not make the same collective calls)");
    if (bytes != 0) std::memcpy(static_cast<char*>(all) + r * bytes, slot.data(), bytes);
  }
}

void ThreadGroup::abort(int rank, const std::string& why) {
  std::lock_guard lock(mutex_);
  if (aborted_) return;
  aborted_ = true;
  failed_rank_ = rank;
  failure_ = why;
  cv_.notify_all();
}

bool ThreadGroup::aborted() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

void ThreadGroup::reset() {
  std::lock_guard lock(mutex_);
  aborted_ = false;
  failed_rank_ = -1;
  failure_.clear();
  arrived_count_ = 0;
  std::fill(arrived_.begin(), arrived_.end(), false);
  std::fill(allgathers_.begin(), allgathers_.end(), 0);
  ++generation_;
}

void run_spmd(ThreadGroup& group, const std::function<void(int)>& fn) {
  group.reset();
  std::mutex mutex;
  std::exception_ptr root, secondary;
  std::vector<std::thread> threads;
  threads.reserve(group.size());
  for (int r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] {
      detail::set_thread_rank(r);
      try {
        fn(r);
      } catch (const PeerFailed&) {
        std::lock_guard lock(mutex);
        if (!secondary) secondary = std::current_exception();
      } catch (const std::exception& e) {
        {
          std::lock_guard lock(mutex);
          if (!root) root = std::current_exception();
        }
        group.abort(r, e.what());
      } catch (...) {
        {
          std::lock_guard lock(mutex);
          if (!root) root = std::current_exception();
        }
        group.abort(r, "an exception that is not a std::exception");
      }
    });
  for (auto& t : threads) t.join();
  if (root) std::rethrow_exception(root);
  if (secondary) std::rethrow_exception(secondary);
}

}  // namespace tilelink
