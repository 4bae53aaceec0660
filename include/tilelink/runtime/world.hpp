// tilelink/runtime/world.hpp — the ways ranks are realised.
//
// InProcessWorld: N ranks in one process over the visible GPUs (rank r on GPU r % #GPUs); several
// ranks may share one GPU. Every test runs this way on a one-GPU machine.
// ProcessWorld: one process per rank over a bootstrap the caller supplies (a launcher's store,
// torch.distributed, ...); peers' heaps mapped by the transport WorldOptions::transport picks
// (CUDA IPC, or NVSHMEM), so far always by load/store: every rank is on one node.
// MpiWorld: a ProcessWorld bootstrapped over MPI, for programs launched by mpirun (two processes
// may share a GPU; run MPS for them to execute concurrently).
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

class ProcessWorld {
 public:
  // Collective: every rank of `bootstrap` constructs its ProcessWorld, on the GPU it runs on.
  // `bootstrap` must outlive the world.
  ProcessWorld(Bootstrap& bootstrap, int device, WorldOptions options = {});
  // Collective too: every rank stops using its peers' heaps before any rank frees its own.
  ~ProcessWorld();
  ProcessWorld(const ProcessWorld&) = delete;
  ProcessWorld& operator=(const ProcessWorld&) = delete;

  int size() const { return context_->num_ranks(); }
  Context& context() { return *context_; }

 private:
  Bootstrap& bootstrap_;
  std::unique_ptr<Context> context_;
};

class MpiWorld {
 public:
  // Initialises MPI if nobody did (and finalises it in the destructor then).
  MpiWorld(int* argc, char*** argv, WorldOptions options = {});
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int size() const { return world_->size(); }
  Context& context() { return world_->context(); }

 private:
  bool owns_mpi_ = false;
  std::unique_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<ProcessWorld> world_;
};

}  // namespace tilelink
