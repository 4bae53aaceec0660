// Builds without NVSHMEM (TILELINK_WITH_NVSHMEM=OFF): no world has peers that only NVSHMEM reaches,
// so the gather over it is never launched.
#include "ops/ag_gemm/gather_nvshmem.hpp"

namespace tilelink::ops {

cudaError_t launch_ready_notify_nvshmem(const ll::Team&, uint64_t*, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_ag_gather_nvshmem(const AgGatherParams&, int, cudaStream_t) { return cudaErrorNotSupported; }

}  // namespace tilelink::ops
