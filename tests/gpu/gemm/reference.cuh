// Test helpers for the GEMM engine: device buffers, random inputs, an fp32 reference GEMM.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace tltest {

#define TLT_CUDA(call)                                                                      \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    ASSERT_EQ(e_, cudaSuccess) << #call << ": " << cudaGetErrorString(e_);                  \
  } while (0)

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) {
    if (cudaMalloc(&ptr, (count ? count : 1) * sizeof(T)) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> host() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
};

template <class T>
__host__ __device__ inline float to_f(T x);
template <>
__host__ __device__ inline float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__host__ __device__ inline float to_f(__half x) { return __half2float(x); }
template <class T>
__host__ __device__ inline T from_f(float x);
template <>
__host__ __device__ inline __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
template <>
__host__ __device__ inline __half from_f(float x) { return __float2half_rn(x); }

__host__ __device__ inline uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// mode 0: uniform in [-1, 1) rounded to T. mode 1: k/8 for k in [-8, 8] (exact products, and
// every fp32 partial sum of a K <= 2^17 dot product is exact: the result is bitwise checkable).
// Never zero-only: both modes are dense and non-zero on average.
template <class T>
__global__ void fill_random(T* p, int64_t rows, int64_t cols, int64_t ld, uint64_t seed, int mode) {
  const int64_t total = rows * ld;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % ld;
    const uint32_t h = hash32(seed * 0x9E3779B97F4A7C15ull + uint64_t(i));
    float v;
    if (c >= cols) v = 1.0e4f;  // padding past the logical columns: must never be read into D
    else if (mode == 0) v = (float(h >> 8) * (1.0f / 16777216.0f)) * 2.0f - 1.0f;
    else v = float(int(h % 17u) - 8) / 8.0f;
    p[i] = from_f<T>(v);
  }
}

template <class T>
__global__ void fill_value(T* p, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = from_f<T>(v);
}

// ref[m][n] = sum_k A[m][k] * B[n][k] in fp32 (sequential in k), abs[m][n] = sum_k |A*B|.
template <class T>
__global__ void reference_gemm(const T* A, const T* B, float* ref, float* absref, int M, int N, int K,
                               int64_t lda, int64_t ldb) {
  __shared__ float As[32][33];
  __shared__ float Bs[32][33];
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;  // 32 x 8 threads
  const int m0 = blockIdx.y * 32, n0 = blockIdx.x * 32;
  float acc[4] = {0, 0, 0, 0}, aacc[4] = {0, 0, 0, 0};
  for (int k0 = 0; k0 < K; k0 += 32) {
    for (int r = ty; r < 32; r += 8) {
      const int m = m0 + r, n = n0 + r, k = k0 + tx;
      As[r][tx] = (m < M && k < K) ? to_f(A[int64_t(m) * lda + k]) : 0.f;
      Bs[r][tx] = (n < N && k < K) ? to_f(B[int64_t(n) * ldb + k]) : 0.f;
    }
    __syncthreads();
    for (int kk = 0; kk < 32; ++kk) {
      for (int i = 0; i < 4; ++i) {
        const float p = As[ty + 8 * i][kk] * Bs[tx][kk];
        acc[i] += p;
        aacc[i] += fabsf(p);
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 8 * i, n = n0 + tx;
    if (m < M && n < N) {
      ref[int64_t(m) * N + n] = acc[i];
      absref[int64_t(m) * N + n] = aacc[i];
    }
  }
}

template <class T>
constexpr float unit_roundoff() {
  return std::is_same_v<T, __nv_bfloat16> ? 1.0f / 256.0f : 1.0f / 2048.0f;  // 2^-8, 2^-11
}

struct CheckResult {
  int64_t bad = 0;
  double max_err = 0;
  std::string first;
};

// Compares D (ldd) against the fp32 reference.
//   exact: D must equal round_to_nearest(ref) bitwise (valid for mode-1 inputs).
//   else:  |D - ref| <= u * |ref| + 2^-16 * sum|a*b| : the output rounding (u = unit roundoff
//          of the output type) plus fp32 accumulation-order differences between the engine's
//          tensor-core sums and the sequential reference, which are bounded by a small multiple
//          of 2^-24 * K * sum|a*b| in the worst case and ~2^-24 * sqrt(K) * sum|a*b| in practice;
//          2^-16 covers K up to 2^8 worst case and far beyond in practice.
// Also checks that D's padding columns [N, ldd) still hold the poison.
template <class T>
CheckResult check_d(const std::vector<T>& D, const std::vector<float>& ref, const std::vector<float>& absref,
                    int64_t M, int64_t N, int64_t ldd, bool exact, float poison) {
  CheckResult r;
  const float u = unit_roundoff<T>();
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < ldd; ++n) {
      const float d = to_f(D[m * ldd + n]);
      bool ok;
      double err = 0;
      if (n >= N) {
        ok = (d == to_f(from_f<T>(poison)));
      } else {
        const float x = ref[m * N + n];
        if (exact) {
          ok = (d == to_f(from_f<T>(x)));
          err = std::fabs(double(d) - x);
        } else {
          err = std::fabs(double(d) - x);
          ok = std::isfinite(d) && err <= u * std::fabs(x) + std::ldexp(1.0, -16) * absref[m * N + n] + 1e-6;
        }
      }
      if (err > r.max_err) r.max_err = err;
      if (!ok) {
        if (r.bad == 0) {
          char buf[200];
          snprintf(buf, sizeof buf, "D[%lld][%lld] = %g, expected %g", (long long)m, (long long)n, d,
                   n < N ? ref[m * N + n] : poison);
          r.first = buf;
        }
        ++r.bad;
      }
    }
  }
  return r;
}

inline uint64_t fresh_seed() {
  static std::mt19937_64 gen{std::random_device{}()};
  return gen();
}

}  // namespace tltest
