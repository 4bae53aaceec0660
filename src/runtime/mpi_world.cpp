// One rank per process under mpirun: bootstrap over MPI, peers' heaps through the chosen transport.
#include <mpi.h>

#include <chrono>
#include <climits>
#include <thread>

#include "check.hpp"
#include "options.hpp"
#include "tilelink/runtime/world.hpp"

namespace tilelink {

using detail::check_cuda;

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

template <class... Args>
void check_mpi(int rc, const char* call, const Args&... args) {
  if (rc == MPI_SUCCESS) return;
  detail::fail(detail::rank_prefix(), ": ", call, "(", args..., ") failed: ", mpi_error_text(rc));
}

// Host collectives over MPI, bounded in time: each is a non-blocking MPI call polled until it
// completes or `timeout_ms` passes. A peer that never arrives (stuck, or waiting for a device
// that never finishes) then becomes a tilelink::Error on this rank instead of a hang. MPI cannot
// cancel a collective in flight, so after such an error the world cannot be used any more.
class MpiBootstrap final : public Bootstrap {
 public:
  // Takes ownership of `comm` (a duplicate of MPI_COMM_WORLD that returns errors).
  MpiBootstrap(MPI_Comm comm, uint64_t timeout_ms) : comm_(comm), timeout_ms_(timeout_ms) {
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
  ~MpiBootstrap() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allgather(const void* mine, void* all, size_t bytes) override {
    TL_REQUIRE(bytes <= size_t(INT_MAX), "tilelink rank ", rank_, ": allgather of ", bytes,
               " bytes per rank is larger than MPI's int count");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgather(mine, int(bytes), MPI_BYTE, all, int(bytes), MPI_BYTE, comm_, &request),
              "MPI_Iallgather", bytes, " bytes per rank, MPI_BYTE");
    complete(request, "allgather");
  }
  void barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    complete(request, "barrier");
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  uint64_t timeout_ms_;

  void complete(MPI_Request& request, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    const auto limit = std::chrono::milliseconds(timeout_ms_);
    for (int polls = 0;; ++polls) {
      int done = 0;
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", what);
      if (done) return;
      if (std::chrono::steady_clock::now() - start > limit)
        detail::fail("tilelink rank ", rank_, ": the host ", what, " over MPI timed out after ", timeout_ms_,
                     " ms: a peer process did not reach it (it is stuck, failed, or makes different calls). "
                     "The world cannot be used after this; TILELINK_BARRIER_TIMEOUT_MS sets the bound");
      // Spin briefly (host collectives sit between op calls), then yield the core.
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
};

}  // namespace

MpiWorld::MpiWorld(int* argc, char*** argv, WorldOptions options) {
  int initialized = 0, finalized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  check_mpi(MPI_Finalized(&finalized), "MPI_Finalized");
  TL_REQUIRE(!finalized, "MpiWorld: MPI was already finalised in this process");
  if (!initialized) {
    int provided = 0;  // only the thread that made the world calls MPI
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread",
              "MPI_THREAD_FUNNELED");
    owns_mpi_ = true;
  }
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup", "MPI_COMM_WORLD");
  check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
            "MPI_ERRORS_RETURN");
  auto bootstrap = std::make_unique<MpiBootstrap>(comm, resolve_options(options).barrier_timeout_ms);
  const int rank = bootstrap->rank(), size = bootstrap->size();
  detail::set_thread_rank(rank);
  TL_REQUIRE(size <= ll::kMaxWorldRanks, "MpiWorld: ", size, " processes; a world has 1 to ",
             ll::kMaxWorldRanks, " ranks");

  // The node-local rank picks the GPU, so `mpirun -np 2` on a one-GPU node shares GPU 0.
  MPI_Comm local = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local),
            "MPI_Comm_split_type", "MPI_COMM_TYPE_SHARED, key ", rank);
  int local_rank = 0, local_size = 0;
  check_mpi(MPI_Comm_rank(local, &local_rank), "MPI_Comm_rank", "node-local communicator");
  check_mpi(MPI_Comm_size(local, &local_size), "MPI_Comm_size", "node-local communicator");
  check_mpi(MPI_Comm_free(&local), "MPI_Comm_free", "node-local communicator");
  TL_REQUIRE(local_size == size || resolve_transport(options.transport) == Transport::nvshmem, "MpiWorld: the ",
             size, " processes span more than one node (", local_size, " on rank ", rank,
             "'s node); CUDA IPC reaches peers on this node only: use the NVSHMEM transport"
             " (TILELINK_TRANSPORT=nvshmem) across nodes");

  const int device = local_rank % detail::visible_device_count("MpiWorld");
  bootstrap_ = std::move(bootstrap);
  world_ = std::make_unique<ProcessWorld>(*bootstrap_, device, options);
}

MpiWorld::~MpiWorld() {
  world_.reset();
  bootstrap_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_mpi_ && !finalized) MPI_Finalize();
}

}  // namespace tilelink
