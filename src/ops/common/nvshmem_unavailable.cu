// Builds without NVSHMEM (TILELINK_WITH_NVSHMEM=OFF): no world has peers that only NVSHMEM reaches,
// so the ops' kernels over it are never launched.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/ag_gemm/gather_nvshmem.hpp"
#include "ops/common/nvshmem_launch.hpp"

namespace tilelink::ops {

cudaError_t launch_ready_notify_nvshmem(const ll::Team&, uint64_t*, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_ag_gather_nvshmem(const AgGatherParams&, int, cudaStream_t) { return cudaErrorNotSupported; }
cudaError_t launch_allgather_ll_nvshmem(const AllgatherLlParams&, int, cudaStream_t) { return cudaErrorNotSupported; }
template <class T>
cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<T>&, int, cudaStream_t) {
  return cudaErrorNotSupported;
}
template cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<__nv_bfloat16>&, int, cudaStream_t);
template cudaError_t launch_full_mesh_push_nvshmem(const ReduceParams<__half>&, int, cudaStream_t);
template <class T>
cudaError_t launch_allreduce_push_nvshmem(const ReduceParams<T>&, int, cudaStream_t) {
  return cudaErrorNotSupported;
}
template cudaError_t launch_allreduce_push_nvshmem(const ReduceParams<__nv_bfloat16>&, int, cudaStream_t);
template cudaError_t launch_allreduce_push_nvshmem(const ReduceParams<__half>&, int, cudaStream_t);

template <class T>
cudaError_t launch_moe_rs_fused_nvshmem(const MoeRsFusedParams&, int, cudaStream_t) {
  return cudaErrorNotSupported;
}
template cudaError_t launch_moe_rs_fused_nvshmem<__nv_bfloat16>(const MoeRsFusedParams&, int, cudaStream_t);
template cudaError_t launch_moe_rs_fused_nvshmem<__half>(const MoeRsFusedParams&, int, cudaStream_t);

}  // namespace tilelink::ops
