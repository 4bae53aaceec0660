// split_k_reduce's second pass: D = the sum of the slices' fp32 partial sums, in slice order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tilelink/core/error.hpp"
#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm::detail {
namespace {

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// One thread per 8 consecutive outputs of a row (N is a multiple of 8): two 16-byte loads per
// slice, one 16-byte store. The sum starts at slice 0 and adds the others in order, so the result
// does not depend on the grid.
template <class T>
__global__ void sum_partial_sums(const float* __restrict__ partials, int splits, int64_t M, int64_t N,
                                 T* __restrict__ D, int64_t ldd) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched to overlap the partials kernel's tail: wait for it (and its writes) here.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const int64_t per_row = N / 8;
  const int64_t groups = M * per_row;
  const int64_t slice = M * N;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups; g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = g / per_row, n = (g - m * per_row) * 8;
    const float* src = partials + m * N + n;
    float acc[8];
    {
      const float4 a = *reinterpret_cast<const float4*>(src);
      const float4 b = *reinterpret_cast<const float4*>(src + 4);
      acc[0] = a.x, acc[1] = a.y, acc[2] = a.z, acc[3] = a.w, acc[4] = b.x, acc[5] = b.y, acc[6] = b.z, acc[7] = b.w;
    }
    for (int l = 1; l < splits; ++l) {
      const float4 a = *reinterpret_cast<const float4*>(src + l * slice);
      const float4 b = *reinterpret_cast<const float4*>(src + l * slice + 4);
      acc[0] += a.x, acc[1] += a.y, acc[2] += a.z, acc[3] += a.w;
      acc[4] += b.x, acc[5] += b.y, acc[6] += b.z, acc[7] += b.w;
    }
    alignas(16) T out[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = from_float<T>(acc[i]);
    *reinterpret_cast<uint4*>(D + m * ldd + n) = *reinterpret_cast<const uint4*>(out);
  }
}

template <class T>
void launch_sum(const float* partials, int splits, int64_t M, int64_t N, void* D, int64_t ldd, bool overlap,
                cudaStream_t stream) {
  const int64_t groups = M * (N / 8);
  if (groups == 0) return;
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) (void)cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((groups + kThreads - 1) / kThreads, int64_t(sms) * 8);
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = overlap ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&cfg, sum_partial_sums<T>, partials, splits, M, N, static_cast<T*>(D), ldd);
  TL_REQUIRE(e == cudaSuccess, "gemm: split_k_reduce sum launch failed: ", cudaGetErrorString(e));
}

}  // namespace

void launch_split_reduce(DType dtype, const float* partials, int splits, int64_t M, int64_t N, void* D, int64_t ldd,
                         bool overlap_previous, cudaStream_t stream) {
  if (dtype == DType::bf16) return launch_sum<__nv_bfloat16>(partials, splits, M, N, D, ldd, overlap_previous, stream);
  if (dtype == DType::fp16) return launch_sum<__half>(partials, splits, M, N, D, ldd, overlap_previous, stream);
  ::tilelink::detail::fail("gemm: split_k_reduce: unsupported dtype ", static_cast<int>(dtype));
}

}  // namespace tilelink::gemm::detail
