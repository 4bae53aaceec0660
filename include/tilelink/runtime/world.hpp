// tilelink/runtime/world.hpp — the ways ranks are realised.
//
// InProcessWorld: N ranks in one process over the visible GPUs (rank r on GPU r % #GPUs); several
// ranks may share one GPU. Every test runs this way on a one-GPU machine.
// MpiWorld: one process per rank launched by mpirun; bootstrap over MPI, peers' heaps mapped with
// CUDA IPC (two processes may share a GPU; run MPS for them to execute concurrently).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "tilelink/runtime/context.hpp"

namespace tilelink {

class InProcessWorld {
 public:
  explicit InProcessWorld(int num_ranks, WorldOptions options = {});
  ~InProcessWorld();
  InProcessWorld(const InProcessWorld&) = delete;
  InProcessWorld& operator=(const InProcessWorld&) = delete;

  int size() const { return int(contexts_.size()); }
  Context& context(int rank) { return *contexts_.at(rank); }

  // Runs fn(context) for every rank, each on its own host thread (SPMD). If any rank throws, the
  // others are released from host barriers with an error too, and the first failure is rethrown.
  void run(const std::function<void(Context&)>& fn);

 private:
  struct Shared;
  std::unique_ptr<Shared> shared_;
  std::vector<std::unique_ptr<Bootstrap>> bootstraps_;
  std::vector<std::unique_ptr<Context>> contexts_;
};

class MpiWorld {
 public:
  // Initialises MPI if nobody did (and finalises it in the destructor then).
  MpiWorld(int* argc, char*** argv, WorldOptions options = {});
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int size() const;
  Context& context() { return *context_; }

 private:
  bool owns_mpi_ = false;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<Context> context_;
};

}  // namespace tilelink
