#include "tilelink/testing/check.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "tilelink/core/error.hpp"

namespace tilelink::test {
namespace {

__host__ __device__ inline uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class T>
__device__ T from_float(float v);
template <>
__device__ __nv_bfloat16 from_float(float v) { return __float2bfloat16(v); }
template <>
__device__ __half from_float(float v) { return __float2half(v); }

template <class T>
__global__ void fill_uniform_kernel(T* p, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t r = splitmix(seed ^ splitmix(uint64_t(i)));
    const float u = float(r >> 40) * (1.0f / float(1 << 24));  // [0, 1)
    p[i] = from_float<T>((2.0f * u - 1.0f) * scale);
  }
}

template <class T>
__global__ void fill_nan_kernel(T* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = from_float<T>(__int_as_float(0x7fc00000));
}

struct Partial {
  double diff2, ref2, excess;
  int64_t bad, worst;
};

template <class T>
__global__ void compare_kernel(const T* out, int64_t ldo, const float* ref, int64_t m, int64_t n,
                               double atol, double rtol, Partial* partials) {
  __shared__ Partial s[256];
  Partial p{0, 0, 0, 0, -1};
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < m * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / n, col = i % n;
    const double o = double(float(out[row * ldo + col])), r = double(ref[i]);
    const double d = o - r;
    const double excess = fabs(d) / (atol + rtol * fabs(r));
    p.diff2 += d * d;
    p.ref2 += r * r;
    if (!(excess <= 1.0)) ++p.bad;  // also NaN
    if (!(excess <= p.excess)) {    // NaN wins
      p.excess = isnan(excess) ? INFINITY : excess;
      p.worst = i;
    }
  }
  s[threadIdx.x] = p;
  __syncthreads();
  if (threadIdx.x == 0) {
    Partial t{0, 0, 0, 0, -1};
    for (int j = 0; j < blockDim.x; ++j) {
      t.diff2 += s[j].diff2;
      t.ref2 += s[j].ref2;
      t.bad += s[j].bad;
      if (s[j].excess > t.excess || (t.worst < 0 && s[j].worst >= 0)) {
        t.excess = s[j].excess;
        t.worst = s[j].worst;
      }
    }
    partials[blockIdx.x] = t;
  }
}

int grid_for(int64_t n) { return int(std::min<int64_t>((n + 255) / 256, 1024)); }

int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

// The reference GEMM runs on the CUDA cores in fp32, its own code: a check must not share its
// failures with the library under test or with the baseline (cuBLASLt has returned wrong results
// on some few-row, deep-K shapes). Each block computes a 64x64 tile of ref, each of its 16x16
// threads a 4x4 strided subset; every output's sum runs over k in order.
constexpr int kRefTile = 64, kRefDepth = 16;

template <class T>
__global__ void reference_gemm_kernel(const T* a, const T* b, float* ref, int64_t m, int64_t n, int64_t k,
                                      float beta) {
  __shared__ float as[kRefDepth][kRefTile + 1];
  __shared__ float bs[kRefDepth][kRefTile + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = int64_t(blockIdx.y) * kRefTile, n0 = int64_t(blockIdx.x) * kRefTile;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kRefDepth) {
    for (int e = threadIdx.x; e < kRefTile * kRefDepth; e += blockDim.x) {
      const int row = e / kRefDepth, kk = e % kRefDepth;
      const int64_t kg = k0 + kk;
      as[kk][row] = (m0 + row < m && kg < k) ? float(a[(m0 + row) * k + kg]) : 0.0f;
      bs[kk][row] = (n0 + row < n && kg < k) ? float(b[(n0 + row) * k + kg]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kRefDepth; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        av[i] = as[kk][ty + 16 * i];
        bv[i] = bs[kk][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
      if (row < m && col < n) {
        float* out = ref + row * n + col;
        *out = beta == 0.0f ? acc[i][j] : acc[i][j] + beta * *out;
      }
    }
}

}  // namespace

void fill_uniform(DType dtype, void* dev, int64_t n, uint64_t seed, float scale, cudaStream_t stream) {
  if (n == 0) return;
  if (dtype == DType::bf16)
    fill_uniform_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dev), n, seed, scale);
  else
    fill_uniform_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__half*>(dev), n, seed, scale);
  TL_CUDA_CHECK(cudaGetLastError());
}

void poison_nan(DType dtype, void* dev, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (dtype == DType::bf16)
    fill_nan_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dev), n);
  else
    fill_nan_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__half*>(dev), n);
  TL_CUDA_CHECK(cudaGetLastError());
}

void reference_gemm(DType dtype, const void* a, const void* b, float* ref, int64_t m, int64_t n, int64_t k,
                    cudaStream_t stream, int terms, int64_t a_stride, int64_t b_stride, float beta) {
  TL_REQUIRE(m >= 0 && n >= 0 && k >= 0 && terms >= 1, "reference_gemm: bad problem m=", m, " n=", n, " k=", k,
             " terms=", terms);
  if (m == 0 || n == 0) return;
  TL_REQUIRE(ceil_div(m, kRefTile) <= 65535, "reference_gemm: m=", m, " is over the grid's rows");
  const dim3 grid(unsigned(ceil_div(n, kRefTile)), unsigned(ceil_div(m, kRefTile)));
  for (int i = 0; i < terms; ++i) {
    const float b0 = i == 0 ? beta : 1.0f;
    if (dtype == DType::bf16)
      reference_gemm_kernel<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(a) + i * a_stride,
                                                      static_cast<const __nv_bfloat16*>(b) + i * b_stride, ref, m, n,
                                                      k, b0);
    else
      reference_gemm_kernel<<<grid, 256, 0, stream>>>(static_cast<const __half*>(a) + i * a_stride,
                                                      static_cast<const __half*>(b) + i * b_stride, ref, m, n, k, b0);
    TL_CUDA_CHECK(cudaGetLastError());
  }
}

Comparison compare(DType dtype, const void* out, int64_t ldo, const float* ref, int64_t m, int64_t n,
                   double atol, double rtol, cudaStream_t stream) {
  const int blocks = grid_for(m * n);
  Partial* d = nullptr;
  TL_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&d), blocks * sizeof(Partial), stream));
  if (dtype == DType::bf16)
    compare_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(out), ldo, ref, m, n, atol, rtol, d);
  else
    compare_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __half*>(out), ldo, ref, m, n, atol, rtol, d);
  TL_CUDA_CHECK(cudaGetLastError());
  std::vector<Partial> h(blocks);
  TL_CUDA_CHECK(cudaMemcpyAsync(h.data(), d, blocks * sizeof(Partial), cudaMemcpyDeviceToHost, stream));
  TL_CUDA_CHECK(cudaFreeAsync(d, stream));
  TL_CUDA_CHECK(cudaStreamSynchronize(stream));
  Comparison c;
  double diff2 = 0, ref2 = 0;
  for (const auto& p : h) {
    diff2 += p.diff2;
    ref2 += p.ref2;
    c.bad += p.bad;
    if (p.excess > c.worst_excess || (c.worst_index < 0 && p.worst >= 0)) {
      c.worst_excess = p.excess;
      c.worst_index = p.worst;
    }
  }
  c.rel_fro = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (std::isnan(c.rel_fro)) c.rel_fro = INFINITY;
  if (c.worst_index >= 0) {
    const int64_t row = c.worst_index / n, col = c.worst_index % n;
    uint16_t raw = 0;
    TL_CUDA_CHECK(cudaMemcpy(&raw, static_cast<const char*>(out) + (row * ldo + col) * 2, 2, cudaMemcpyDeviceToHost));
    TL_CUDA_CHECK(cudaMemcpy(&c.worst_ref, ref + c.worst_index, 4, cudaMemcpyDeviceToHost));
    if (dtype == DType::bf16) {
      uint32_t bits = uint32_t(raw) << 16;
      std::memcpy(&c.worst_out, &bits, 4);
    } else {
      __half_raw hr;
      hr.x = raw;
      c.worst_out = __half2float(__half(hr));
    }
  }
  return c;
}

std::string describe(const Comparison& c) {
  std::ostringstream os;
  os << "rel_fro=" << c.rel_fro << " bad=" << c.bad << " worst_excess=" << c.worst_excess;
  if (c.worst_index >= 0) os << " at flat index " << c.worst_index << " (out " << c.worst_out << ", ref " << c.worst_ref << ")";
  return os.str();
}

Tolerance gemm_tolerance(DType dtype, int64_t k) {
  // One rounding of the output: half an ulp relative (2^-8 bf16, 2^-11 fp16), doubled for the
  // different fp32 summation orders of cuBLAS and the engine; atol covers outputs near zero, whose
  // size is ~sqrt(k) * scale^2 for uniform inputs.
  const double ulp = dtype == DType::bf16 ? 1.0 / 256 : 1.0 / 2048;
  const double typical = std::sqrt(double(k)) / 3.0;  // E|sum| for U(-1,1) products
  return {ulp * typical * 0.5, 2 * ulp, dtype == DType::bf16 ? 5e-3 : 1e-3};
}

}  // namespace tilelink::test
