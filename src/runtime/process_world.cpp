// One rank per process over the caller's bootstrap: peers' heaps through CUDA IPC or NVSHMEM.
#include "check.hpp"
#include "heap_transport.hpp"
#include "tilelink/runtime/world.hpp"

namespace tilelink {

ProcessWorld::ProcessWorld(Bootstrap& bootstrap, int device, WorldOptions options) : bootstrap_(bootstrap) {
  TL_REQUIRE(bootstrap.size() >= 1 && bootstrap.size() <= ll::kMaxWorldRanks, "ProcessWorld: ", bootstrap.size(),
             " ranks; a world has 1 to ", ll::kMaxWorldRanks, " ranks");
  TL_REQUIRE(bootstrap.rank() >= 0 && bootstrap.rank() < bootstrap.size(), "ProcessWorld: rank ", bootstrap.rank(),
             " is not in [0, ", bootstrap.size(), ")");
  const int devices = detail::visible_device_count("ProcessWorld");
  TL_REQUIRE(device >= 0 && device < devices, "ProcessWorld: GPU ", device, " is not one of the ", devices,
             " visible to this process");
  detail::set_thread_rank(bootstrap.rank());
  detail::check_cuda(cudaSetDevice(device), "cudaSetDevice", device);
  context_ = std::make_unique<Context>(bootstrap, device, options,
                                       detail::make_process_transport(options, bootstrap, device));
  try {
    context_->connect();
  } catch (...) {
    context_->abandon_peers();
    throw;
  }
}

ProcessWorld::~ProcessWorld() {
  // Every rank stops using its peers' heaps, then closes its handles, before any heap is freed.
  try {
    bootstrap_.barrier();
    context_->disconnect();
    bootstrap_.barrier();
  } catch (...) {
    // A failed world still frees what it holds, alone; the failure was reported where it happened.
    context_->abandon_peers();
  }
  context_.reset();
}

}  // namespace tilelink
