// split_k_reduce's second pass: D = the sum of the slices' fp32 partial sums plus the products of
// the last K columns no slice holds, in a fixed order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tilelink/core/error.hpp"
#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm::detail {
namespace {

// acc[i] += A[m, c .. c+8) . B[n+i, c .. c+8): one 16-byte load of each row, 64 products.
template <class T>
__device__ __forceinline__ void add_tail_step(float (&acc)[8], const T* __restrict__ A, int64_t lda,
                                              const T* __restrict__ B, int64_t ldb, int64_t c, int64_t m,
                                              int64_t n) {
  alignas(16) T a[8];
  *reinterpret_cast<uint4*>(a) = *reinterpret_cast<const uint4*>(A + m * lda + c);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    alignas(16) T b[8];
    *reinterpret_cast<uint4*>(b) = *reinterpret_cast<const uint4*>(B + (n + i) * ldb + c);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i] = fmaf(float(a[j]), float(b[j]), acc[i]);
  }
}

// Slices whose loads one lane has in flight at once in sum_partial_sums.
constexpr int kBatch = 4;

__device__ __forceinline__ void load_eight(float4 (&v)[2], const float* __restrict__ p) {
  v[0] = *reinterpret_cast<const float4*>(p);
  v[1] = *reinterpret_cast<const float4*>(p + 4);
}

__device__ __forceinline__ void add_eight(float (&acc)[8], const float4 (&v)[2]) {
  acc[0] += v[0].x, acc[1] += v[0].y, acc[2] += v[0].z, acc[3] += v[0].w;
  acc[4] += v[1].x, acc[5] += v[1].y, acc[6] += v[1].z, acc[7] += v[1].w;
}

// A group of `lanes` threads (a power of two <= 32) per 8 consecutive outputs of a row (N is a
// multiple of 8). Lane j adds slices j, j + lanes, … in order (two 16-byte loads each) and the
// tail's 8-column steps j, j + lanes, …; then the group's lanes add their sums in a butterfly,
// and lane 0 stores the 8 outputs with one 16-byte store. The order of every addition depends on
// `lanes` (chosen from the shape and the GPU's SM count), not on the grid or the timing, so the
// result is the same every run. Several lanes per group when the outputs are few (a short, deep
// GEMM has a few thousand) or a tail is to be multiplied: one thread per group left most of the
// GPU idle and ran the tail's steps one after the other (5 x 488 outputs, 14 steps of tail:
// 24 us against 10 us without a tail).
template <class T>
__global__ void sum_partial_sums(const float* __restrict__ partials, int splits, int64_t M, int64_t N,
                                 T* __restrict__ D, int64_t ldd, const T* __restrict__ A, int64_t lda,
                                 const T* __restrict__ B, int64_t ldb, int64_t k0, int64_t k, int lanes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched to overlap the partials kernel's tail: wait for it (and its writes) here.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const int64_t per_row = N / 8;
  const int64_t groups = M * per_row;
  const int64_t slice = M * N;
  const int lane = int(threadIdx.x) % lanes;
  const int64_t thread = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / lanes;
  // Every lane of a warp makes the same passes (the shuffles need the whole warp): the loop runs
  // on the warp's first group, and a lane past the last group adds nothing and stores nothing.
  const int64_t warp_first = (thread & ~int64_t(31)) / lanes;
  for (int64_t g = thread / lanes, w = warp_first; w < groups; g += step, w += step) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    const int64_t m = g / per_row, n = (g - m * per_row) * 8;
    if (g < groups) {
      const float* src = partials + m * N + n;
      // kBatch slices' loads are issued before any of them is added, so a lane waits for memory
      // once per batch rather than once per slice; the additions keep the slice order.
      for (int l = lane; l < splits; l += kBatch * lanes) {
        float4 part[kBatch][2];
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
          if (l + j * lanes < splits) load_eight(part[j], src + (l + j * lanes) * slice);
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
          if (l + j * lanes < splits) add_eight(acc, part[j]);
      }
      for (int64_t c = k0 + 8 * int64_t(lane); c < k0 + k; c += 8 * int64_t(lanes))
        add_tail_step(acc, A, lda, B, ldb, c, m, n);
    }
    for (int offset = lanes / 2; offset > 0; offset /= 2)
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], offset, lanes);
    if (g < groups && lane == 0) {
      alignas(16) T out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = T(acc[i]);  // rounds to nearest even
      *reinterpret_cast<uint4*>(D + m * ldd + n) = *reinterpret_cast<const uint4*>(out);
    }
  }
}

template <class T>
void launch_sum(const float* partials, int splits, int64_t M, int64_t N, void* D, int64_t ldd, const KTail& tail,
                bool overlap, cudaStream_t stream) {
  TL_REQUIRE(tail.k % 8 == 0 && tail.k0 % 8 == 0 && tail.lda % 8 == 0 && tail.ldb % 8 == 0,
             "gemm: split_k_reduce's tail must be whole 8-element steps (k0 ", tail.k0, ", k ", tail.k, ")");
  TL_REQUIRE(tail.k == 0 || (tail.A != nullptr && tail.B != nullptr), "gemm: split_k_reduce's tail has no operands");
  const int64_t groups = M * (N / 8);
  if (groups == 0) return;
  int device = 0;
  const cudaError_t de = cudaGetDevice(&device);
  TL_REQUIRE(de == cudaSuccess, "gemm: split_k_reduce: cudaGetDevice failed: ", cudaGetErrorString(de));
  const int sms = device_sm_count(device);
  // Lanes per group: enough for one tail step each, and enough threads to keep every SM busy
  // (~256 per SM) when the outputs are few.
  const int64_t tail_steps = tail.k / 8;
  int lanes = 1;
  while (lanes < 32 && (lanes < tail_steps || groups * lanes < int64_t(sms) * 256)) lanes *= 2;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((groups * lanes + kThreads - 1) / kThreads, int64_t(sms) * 8);
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3(unsigned(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = overlap ? 1 : 0;
  const cudaError_t e =
      cudaLaunchKernelEx(&cfg, sum_partial_sums<T>, partials, splits, M, N, static_cast<T*>(D), ldd,
                         static_cast<const T*>(tail.A), tail.lda, static_cast<const T*>(tail.B), tail.ldb, tail.k0,
                         tail.k, lanes);
  TL_REQUIRE(e == cudaSuccess, "gemm: split_k_reduce sum launch failed: ", cudaGetErrorString(e));
}

}  // namespace

void launch_split_reduce(DType dtype, const float* partials, int splits, int64_t M, int64_t N, void* D, int64_t ldd,
                         const KTail& tail, bool overlap_previous, cudaStream_t stream) {
  if (dtype == DType::bf16)
    return launch_sum<__nv_bfloat16>(partials, splits, M, N, D, ldd, tail, overlap_previous, stream);
  if (dtype == DType::fp16) return launch_sum<__half>(partials, splits, M, N, D, ldd, tail, overlap_previous, stream);
  ::tilelink::detail::fail("gemm: split_k_reduce: unsupported dtype ", static_cast<int>(dtype));
}

}  // namespace tilelink::gemm::detail
