// N ranks in one process: a thread per rank, rank r on GPU r % #GPUs, heaps shared by pointer.
#include <cuda.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "check.hpp"
#include "gpu_sharing.hpp"
#include "heap_transport.hpp"
#include "options.hpp"
#include "thread_bootstrap.hpp"
#include "tilelink/runtime/world.hpp"

namespace tilelink {

using detail::check_cuda;

namespace {

// Every live world's ranks per GPU of this process. Leaked on purpose: a world destroyed during
// static destruction must still find it.
LiveRanksPerGpu& live_ranks() {
  static auto* live = new LiveRanksPerGpu(hardware_queues(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")));
  return *live;
}

// This world's share of the GPUs' queues, held from before its first stream until after its last.
class QueueReservation {
 public:
  explicit QueueReservation(std::vector<int> devices) : devices_(std::move(devices)) {
    live_ranks().reserve(devices_);
  }
  ~QueueReservation() { live_ranks().release(devices_); }
  QueueReservation(const QueueReservation&) = delete;
  QueueReservation& operator=(const QueueReservation&) = delete;

 private:
  std::vector<int> devices_;
};

}  // namespace

struct InProcessWorld::Shared {
  QueueReservation queues;
  ThreadGroup group;
  Shared(const std::vector<int>& devices, std::chrono::milliseconds timeout)
      : queues(devices), group(int(devices.size()), timeout) {}
};

namespace {

// Ranks on distinct GPUs address each other's heaps directly: enable peer access both ways.
void enable_peer_access(const std::vector<int>& devices) {
  const std::set<int> used(devices.begin(), devices.end());
  if (used.size() < 2) return;
  int previous = 0;
  check_cuda(cudaGetDevice(&previous), "cudaGetDevice");
  for (int a : used)
    for (int b : used) {
      if (a == b) continue;
      int can = 0;
      check_cuda(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer", a, ", ", b);
      TL_REQUIRE(can, "InProcessWorld: GPU ", a, " cannot access GPU ", b,
                 " directly (no peer-to-peer path between them); run ranks on GPUs that have one,"
                 " or fewer ranks");
      check_cuda(cudaSetDevice(a), "cudaSetDevice", a);
      const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();  // another world did it
      else check_cuda(err, "cudaDeviceEnablePeerAccess", "peer GPU ", b, " from GPU ", a);
    }
  check_cuda(cudaSetDevice(previous), "cudaSetDevice", previous);
}

// Ranks sharing a GPU in one process share its CUDA context: a driver operation one rank's thread
// starts can wait for kernels of another rank that spin (bounded) on this rank's signals. Lazy
// module loading (CUDA's default) loads a kernel at its first launch, and the load waits for the
// device. Only the environment the process started with avoids it, which a library must not
// change behind its host program's back (the program may be PyTorch, with its own NCCL): checked
// here, named in the error. (The other shared resource, the GPU's hardware queues, is counted
// over every live world: LiveRanksPerGpu.)
void require_eager_loading(int ranks_per_gpu) {
  if (ranks_per_gpu < 2) return;
  using GetLoadingMode = CUresult (*)(CUmoduleLoadingMode*);
  CUmoduleLoadingMode mode = CU_MODULE_LAZY_LOADING;
  if (const auto get_mode = detail::driver_entry_point<GetLoadingMode>("cuModuleGetLoadingMode"))
    TL_REQUIRE(get_mode(&mode) == CUDA_SUCCESS, "cuModuleGetLoadingMode failed");
  TL_REQUIRE(mode == CU_MODULE_EAGER_LOADING, "InProcessWorld: ", ranks_per_gpu,
             " ranks share one GPU in this process, which needs CUDA_MODULE_LOADING=EAGER in the"
             " environment before the process's first CUDA call (now LAZY), e.g.\n"
             "  CUDA_MODULE_LOADING=EAGER CUDA_DEVICE_MAX_CONNECTIONS=32 ./program\n"
             "or run one rank per GPU");
}

}  // namespace

InProcessWorld::InProcessWorld(int num_ranks, WorldOptions options) {
  TL_REQUIRE(num_ranks >= 1 && num_ranks <= ll::kMaxLocalRanks, "InProcessWorld: ", num_ranks,
             " ranks requested; a world has 1 to ", ll::kMaxLocalRanks,
             " ranks (they reach each other's heaps by load/store; larger worlds are MPI or"
             " ProcessWorld worlds over NVSHMEM)");
  TL_REQUIRE(options.transport == Transport::automatic, "InProcessWorld: transport ",
             transport_name(options.transport), " was asked for, but ranks in one process address each"
             " other's heaps directly; the transport option is for ProcessWorld and MpiWorld");
  const ResolvedOptions resolved = resolve_options(options);
  const int device_count = detail::visible_device_count("InProcessWorld");
  std::vector<int> devices(num_ranks);
  for (int r = 0; r < num_ranks; ++r) devices[r] = r % device_count;
  require_eager_loading((num_ranks + device_count - 1) / device_count);
  // Before any stream of the world exists: refused here, it has nothing to undo.
  shared_ = std::make_unique<Shared>(devices, std::chrono::milliseconds(resolved.barrier_timeout_ms));
  enable_peer_access(devices);

  for (int r = 0; r < num_ranks; ++r)
    bootstraps_.push_back(std::make_unique<ThreadBootstrap>(shared_->group, r));
  contexts_.resize(num_ranks);
  // Contexts are built collectively (they agree on sizes and exchange heap addresses).
  run_spmd(shared_->group, [&](int r) {
    check_cuda(cudaSetDevice(devices[r]), "cudaSetDevice", devices[r]);
    contexts_[r] = std::make_unique<Context>(*bootstraps_[r], devices[r], options,
                                             detail::make_in_process_transport(devices[r]));
    contexts_[r]->connect();
  });
  // Every rank can read every rank's wait report and host progress: errors name whichever wait
  // timed out and how far each rank's host got.
  for (auto& mine : contexts_)
    for (auto& other : contexts_)
      if (other != mine) mine->add_visible_peer(*other);
}

InProcessWorld::~InProcessWorld() {
  // Every stream must be idle before any heap goes away: kernels read their peers' heaps.
  for (auto& c : contexts_)
    if (c) {
      cudaSetDevice(c->device());
      cudaStreamSynchronize(c->stream());
    }
  cudaGetLastError();
  contexts_.clear();
}

void InProcessWorld::run(const std::function<void(Context&)>& fn) {
  run_spmd(shared_->group, [&](int r) {
    Context& c = *contexts_[r];
    check_cuda(cudaSetDevice(c.device()), "cudaSetDevice", c.device());
    fn(c);
  });
}

}  // namespace tilelink
