// One rank per process over the caller's bootstrap: peers' heaps through CUDA IPC.
#include "check.hpp"
#include "tilelink/runtime/world.hpp"

namespace tilelink {

ProcessWorld::ProcessWorld(Bootstrap& bootstrap, int device, WorldOptions options) : bootstrap_(bootstrap) {
  TL_REQUIRE(bootstrap.size() >= 1 && bootstrap.size() <= ll::kMaxRanks, "ProcessWorld: ", bootstrap.size(),
             " ranks; a world has 1 to ", ll::kMaxRanks, " ranks");
  TL_REQUIRE(bootstrap.rank() >= 0 && bootstrap.rank() < bootstrap.size(), "ProcessWorld: rank ", bootstrap.rank(),
             " is not in [0, ", bootstrap.size(), ")");
  const int devices = detail::visible_device_count("ProcessWorld");
  TL_REQUIRE(device >= 0 && device < devices, "ProcessWorld: GPU ", device, " is not one of the ", devices,
             " visible to this process");
  detail::set_thread_rank(bootstrap.rank());
  detail::check_cuda(cudaSetDevice(device), "cudaSetDevice", device);
  context_ = std::make_unique<Context>(bootstrap, device, options);
  context_->connect(/*same_process=*/false);
}

ProcessWorld::~ProcessWorld() {
  // Every rank stops using its peers' heaps, then closes its handles, before any heap is freed.
  try {
    bootstrap_.barrier();
    context_->disconnect();
    bootstrap_.barrier();
  } catch (...) {
    // A failed world still frees what it holds; the failure was reported where it happened.
  }
  context_.reset();
}

}  // namespace tilelink
