// One rank per process under mpirun: bootstrap over MPI, peers' heaps through CUDA IPC.
#include <mpi.h>

#include <climits>

#include "check.hpp"
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

class MpiBootstrap final : public Bootstrap {
 public:
  // Takes ownership of `comm` (a duplicate of MPI_COMM_WORLD that returns errors).
  explicit MpiBootstrap(MPI_Comm comm) : comm_(comm) {
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
    check_mpi(MPI_Allgather(mine, int(bytes), MPI_BYTE, all, int(bytes), MPI_BYTE, comm_),
              "MPI_Allgather", bytes, " bytes per rank, MPI_BYTE");
  }
  // MPI has no timed barrier; a rank that dies makes mpirun end the job.
  void barrier() override { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
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
  auto bootstrap = std::make_unique<MpiBootstrap>(comm);
  const int rank = bootstrap->rank(), size = bootstrap->size();
  detail::set_thread_rank(rank);
  TL_REQUIRE(size <= ll::kMaxRanks, "MpiWorld: ", size, " processes; a world has 1 to ",
             ll::kMaxRanks, " ranks");

  // The node-local rank picks the GPU, so `mpirun -np 2` on a one-GPU node shares GPU 0.
  MPI_Comm local = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local),
            "MPI_Comm_split_type", "MPI_COMM_TYPE_SHARED, key ", rank);
  int local_rank = 0, local_size = 0;
  check_mpi(MPI_Comm_rank(local, &local_rank), "MPI_Comm_rank", "node-local communicator");
  check_mpi(MPI_Comm_size(local, &local_size), "MPI_Comm_size", "node-local communicator");
  check_mpi(MPI_Comm_free(&local), "MPI_Comm_free", "node-local communicator");
  TL_REQUIRE(local_size == size, "MpiWorld: the ", size, " processes span more than one node (",
             local_size, " on rank ", rank, "'s node); intra-node CUDA IPC is the only transport"
             " so far: run all ranks on one node");

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
