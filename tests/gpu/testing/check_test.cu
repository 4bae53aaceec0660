// The checks the op tests rely on must be right on their own: reference_gemm against a double
// sum on the host (fresh random inputs, ragged shapes, one of a few rows and deep K where
// cuBLASLt has been seen wrong), its terms, strides and beta; compare()'s counts, NaN handling
// and worst element; the cuBLASLt baseline against the reference, and the algorithm it names.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/testing/check.hpp"

namespace tt = tilelink::test;
using tilelink::DType;

namespace {

struct Shape {
  int64_t m, n, k;
};

std::string name(const Shape& s, DType dt) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
         (dt == DType::bf16 ? " bf16" : " fp16");
}

std::vector<float> to_float(DType dt, const std::vector<uint8_t>& raw) {
  std::vector<float> out(raw.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t bits;
    std::memcpy(&bits, raw.data() + 2 * i, 2);
    if (dt == DType::bf16) {
      const uint32_t f = uint32_t(bits) << 16;
      std::memcpy(&out[i], &f, 4);
    } else {
      __half_raw h;
      h.x = bits;
      out[i] = __half2float(__half(h));
    }
  }
  return out;
}

// Device buffers of one problem, freed at scope exit.
struct Buffers {
  void* a = nullptr;
  void* b = nullptr;
  float* ref = nullptr;
  Buffers(int64_t a_elems, int64_t b_elems, int64_t ref_elems) {
    TL_CUDA_CHECK(cudaMalloc(&a, a_elems * 2));
    TL_CUDA_CHECK(cudaMalloc(&b, b_elems * 2));
    TL_CUDA_CHECK(cudaMalloc(&ref, ref_elems * sizeof(float)));
  }
  ~Buffers() {
    cudaFree(a);
    cudaFree(b);
    cudaFree(ref);
  }
};

// Every element of `got` against the double sum `want` of the same products: the reference sums
// in fp32, so it may differ by the rounding of K additions, ~K * 2^-24 * sum|a*b| at worst.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& abs_sum,
                  int64_t k, const std::string& what) {
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = double(k) * std::ldexp(1.0, -24) * abs_sum[i] + 1e-30;
    if (!(std::fabs(double(got[i]) - want[i]) <= bound)) {
      if (first < 0) first = int64_t(i);
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": first at flat index " << first << " (got " << (first >= 0 ? got[first] : 0.f)
                    << ", want " << (first >= 0 ? want[first] : 0.0) << ")";
}

// Adds to want[i][j] the sum over terms t of A_t[i,:] . B_t[j,:], and to abs_sum[i][j] that of
// |products|, in double on the host (what want held stands for a beta of 1).
void host_gemm(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n, int64_t k, int terms,
               int64_t a_stride, int64_t b_stride, std::vector<double>& want, std::vector<double>& abs_sum) {
  for (int t = 0; t < terms; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float* ar = a.data() + t * a_stride + i * k;
        const float* br = b.data() + t * b_stride + j * k;
        double s = 0, sa = 0;
        for (int64_t x = 0; x < k; ++x) {
          const double p = double(ar[x]) * double(br[x]);
          s += p;
          sa += std::fabs(p);
        }
        want[i * n + j] += s;
        abs_sum[i * n + j] += sa;
      }
}

TEST(ReferenceGemm, MatchesDoubleSumOnRaggedShapes) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  cudaStream_t st = nullptr;
  TL_CUDA_CHECK(cudaStreamCreate(&st));
  // Ragged against the 64x64 block tile and the 16-deep k step; one row; a few rows, deep K.
  const Shape shapes[] = {{1, 8, 8}, {77, 1000, 264}, {130, 70, 1000}, {64, 64, 16}, {12, 1448, 27464}};
  int index = 0;
  for (const Shape& s : shapes)
    for (DType dt : {DType::bf16, DType::fp16}) {
      ++index;
      Buffers buf(s.m * s.k, s.n * s.k, s.m * s.n);
      tt::fill_uniform(dt, buf.a, s.m * s.k, tt::mix_seed(seed, index, 1), 1.0f, st);
      tt::fill_uniform(dt, buf.b, s.n * s.k, tt::mix_seed(seed, index, 2), 1.0f, st);
      TL_CUDA_CHECK(cudaMemsetAsync(buf.ref, 0xFF, s.m * s.n * sizeof(float), st));  // NaN poison
      tt::reference_gemm(dt, buf.a, buf.b, buf.ref, s.m, s.n, s.k, st);
      const auto a = to_float(dt, tt::download(buf.a, s.m * s.k * 2, st));
      const auto b = to_float(dt, tt::download(buf.b, s.n * s.k * 2, st));
      const auto got = tt::download_n(buf.ref, s.m * s.n, st);
      std::vector<double> want(s.m * s.n, 0.0), abs_sum(s.m * s.n, 0.0);
      host_gemm(a, b, s.m, s.n, s.k, 1, 0, 0, want, abs_sum);
      expect_close(got, want, abs_sum, s.k, name(s, dt));
    }
  TL_CUDA_CHECK(cudaStreamDestroy(st));
}

TEST(ReferenceGemm, SumsTermsWithStridesOntoBeta) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  cudaStream_t st = nullptr;
  TL_CUDA_CHECK(cudaStreamCreate(&st));
  const Shape s{100, 72, 136};
  const int terms = 3;
  const DType dt = DType::bf16;
  Buffers buf(terms * s.m * s.k, terms * s.n * s.k, s.m * s.n);
  tt::fill_uniform(dt, buf.a, terms * s.m * s.k, tt::mix_seed(seed, 1), 1.0f, st);
  tt::fill_uniform(dt, buf.b, terms * s.n * s.k, tt::mix_seed(seed, 2), 1.0f, st);
  const auto a = to_float(dt, tt::download(buf.a, terms * s.m * s.k * 2, st));
  const auto b = to_float(dt, tt::download(buf.b, terms * s.n * s.k * 2, st));

  // beta = 0 ignores what ref held (NaN here); the terms add up.
  TL_CUDA_CHECK(cudaMemsetAsync(buf.ref, 0xFF, s.m * s.n * sizeof(float), st));
  tt::reference_gemm(dt, buf.a, buf.b, buf.ref, s.m, s.n, s.k, st, terms, s.m * s.k, s.n * s.k);
  std::vector<double> want(s.m * s.n, 0.0), abs_sum(s.m * s.n, 0.0);
  host_gemm(a, b, s.m, s.n, s.k, terms, s.m * s.k, s.n * s.k, want, abs_sum);
  const auto first = tt::download_n(buf.ref, s.m * s.n, st);
  expect_close(first, want, abs_sum, terms * s.k, "three terms");

  // beta = 1 adds the first term onto what ref holds.
  tt::reference_gemm(dt, buf.a, buf.b, buf.ref, s.m, s.n, s.k, st, 1, 0, 0, 1.0f);
  std::vector<double> want2(want), abs2(abs_sum);
  host_gemm(a, b, s.m, s.n, s.k, 1, 0, 0, want2, abs2);
  for (size_t i = 0; i < want2.size(); ++i) abs2[i] += std::fabs(want[i]);
  expect_close(tt::download_n(buf.ref, s.m * s.n, st), want2, abs2, 4 * s.k, "beta 1 onto three terms");
  TL_CUDA_CHECK(cudaStreamDestroy(st));
}

TEST(ReferenceGemm, RejectsBadProblems) {
  EXPECT_THROW(tt::reference_gemm(DType::bf16, nullptr, nullptr, nullptr, -1, 8, 8, nullptr), tilelink::Error);
  EXPECT_THROW(tt::reference_gemm(DType::bf16, nullptr, nullptr, nullptr, 8, 8, 8, nullptr, 0), tilelink::Error);
  // An empty output is nothing to do.
  EXPECT_NO_THROW(tt::reference_gemm(DType::bf16, nullptr, nullptr, nullptr, 0, 8, 8, nullptr));
}

TEST(Compare, CountsOffAndNanElementsAndNamesTheWorst) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  cudaStream_t st = nullptr;
  TL_CUDA_CHECK(cudaStreamCreate(&st));
  const int64_t m = 37, n = 300, ldo = 304;
  void* out = nullptr;
  float* ref = nullptr;
  TL_CUDA_CHECK(cudaMalloc(&out, m * ldo * 2));
  TL_CUDA_CHECK(cudaMalloc(&ref, m * n * sizeof(float)));
  tt::fill_uniform(DType::bf16, out, m * ldo, tt::mix_seed(seed, 1), 4.0f, st);
  // ref = out exactly (bf16 values are floats), then three elements disturbed.
  const auto vals = to_float(DType::bf16, tt::download(out, m * ldo * 2, st));
  std::vector<float> h(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) h[i * n + j] = vals[i * ldo + j];
  auto check = [&](int64_t expect_bad, int64_t expect_worst) {
    TL_CUDA_CHECK(cudaMemcpy(ref, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    const auto c = tt::compare(DType::bf16, out, ldo, ref, m, n, 1e-3, 1e-2, st);
    EXPECT_EQ(c.bad, expect_bad) << tt::describe(c);
    EXPECT_EQ(c.worst_index, expect_worst) << tt::describe(c);
    return c;
  };
  const auto same = check(0, -1);
  EXPECT_EQ(same.rel_fro, 0.0);
  // Moved away from zero, so each element's excess |diff| / (atol + rtol |ref|) is bounded:
  // <= 0.5 / 0.006 = 83 for the first, >= 100 / 1.041 = 96 for the second.
  h[5 * n + 7] += std::copysign(0.5f, h[5 * n + 7]);         // off
  h[20 * n + 299] += std::copysign(100.0f, h[20 * n + 299]);  // off, the worst
  h[36 * n + 0] *= 1.001f;                                    // within rtol
  const auto off = check(2, 20 * n + 299);
  EXPECT_GT(off.rel_fro, 0.0);
  h[0] = NAN;  // a NaN in the reference counts and is the worst
  const auto nan = check(3, 0);
  EXPECT_TRUE(std::isinf(nan.rel_fro)) << tt::describe(nan);
  cudaFree(out);
  cudaFree(ref);
  TL_CUDA_CHECK(cudaStreamDestroy(st));
}

// The baseline the benchmarks compare with: cuBLASLt's output within the bf16 tolerance of the
// reference on shapes its heuristic runs different kernels for (many rows, few rows, wide N,
// narrow N), and the algorithm it names is the one it keeps:
// every field present, the same text on a second call, tile and cluster in the engine's order.
TEST(CublasBaseline, MatchesTheReferenceAndNamesItsAlgorithm) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  cudaStream_t st = nullptr;
  TL_CUDA_CHECK(cudaStreamCreate(&st));
  tt::CublasGemm lt(st);
  const Shape shapes[] = {{2048, 4096, 1024}, {64, 2048, 2048}, {415, 19472, 256}, {777, 264, 1160}};
  int index = 0;
  for (const Shape& s : shapes) {
    ++index;
    const DType dt = index % 2 ? DType::bf16 : DType::fp16;
    Buffers buf(s.m * s.k, s.n * s.k, s.m * s.n);
    void* d = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&d, s.m * s.n * 2));
    tt::fill_uniform(dt, buf.a, s.m * s.k, tt::mix_seed(seed, index, 1), 1.0f, st);
    tt::fill_uniform(dt, buf.b, s.n * s.k, tt::mix_seed(seed, index, 2), 1.0f, st);
    tt::poison_nan(dt, d, s.m * s.n, st);
    tt::reference_gemm(dt, buf.a, buf.b, buf.ref, s.m, s.n, s.k, st);
    lt.run(dt, buf.a, buf.b, d, s.m, s.n, s.k);
    const auto tol = tt::gemm_tolerance(dt, s.k);
    const auto c = tt::compare(dt, d, s.n, buf.ref, s.m, s.n, tol.atol, tol.rtol, st);
    EXPECT_EQ(c.bad, 0) << name(s, dt) << ": " << tt::describe(c);
    const std::string algo = lt.algorithm(dt, buf.a, buf.b, d, s.m, s.n, s.k);
    EXPECT_EQ(algo, lt.algorithm(dt, buf.a, buf.b, d, s.m, s.n, s.k)) << name(s, dt);
    EXPECT_EQ(algo.rfind("tile ", 0), 0u) << name(s, dt) << ": " << algo;
    for (const char* field : {" cluster ", " stages ", " splitk ", " swizzle ", " algo ", " option "})
      EXPECT_NE(algo.find(field), std::string::npos) << name(s, dt) << ": no '" << field << "' in " << algo;
    std::printf("  cuBLASLt on %s: %s\n", name(s, dt).c_str(), algo.c_str());
    cudaFree(d);
  }
  TL_CUDA_CHECK(cudaStreamDestroy(st));
}

}  // namespace
