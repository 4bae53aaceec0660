// Builds without NVSHMEM (TILELINK_WITH_NVSHMEM=OFF): asking for its transport is an error.
#include "heap_transport.hpp"

namespace tilelink::detail {

std::unique_ptr<HeapTransport> make_nvshmem_transport(Bootstrap&, int) {
  fail("tilelink: the NVSHMEM transport was asked for (Transport::nvshmem or TILELINK_TRANSPORT=nvshmem),"
       " but this tilelink was built without NVSHMEM (TILELINK_WITH_NVSHMEM=OFF)");
}

}  // namespace tilelink::detail
