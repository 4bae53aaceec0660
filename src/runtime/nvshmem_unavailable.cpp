// Builds without NVSHMEM (TILELINK_WITH_NVSHMEM=OFF): asking for its transport is an error, and
// without it no world has peers that only NVSHMEM reaches, so its kernels are never launched.
#include "heap_transport.hpp"
#include "nvshmem_device.hpp"

namespace tilelink::detail {

std::unique_ptr<HeapTransport> make_nvshmem_transport(Bootstrap&, int, bool) {
  fail("tilelink: the NVSHMEM transport was asked for (Transport::nvshmem or TILELINK_TRANSPORT=nvshmem),"
       " but this tilelink was built without NVSHMEM (TILELINK_WITH_NVSHMEM=OFF)");
}

cudaError_t relay_abort_nvshmem(const ll::Team&, cudaStream_t) { return cudaErrorNotSupported; }

}  // namespace tilelink::detail
