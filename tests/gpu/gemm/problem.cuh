// One GEMM test problem: random operands (fresh seed), the fp32 reference of their product, a
// poisoned output and its check. Shared by the GEMM engine's GPU tests.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "gpu/gemm/reference.cuh"
#include "tilelink/gemm/gemm.hpp"

namespace tltest {

struct Case {
  int64_t M, N, K, lda = 0, ldb = 0, ldd = 0;
};

template <class T>
struct Problem {
  Case c;
  tilelink::gemm::GemmShape s;
  DeviceBuffer<T> A, B, D;
  DeviceBuffer<float> ref, absref;
  std::vector<float> href, habs;
  static constexpr float kPoison = -777.0f;  // exact in fp16; bf16 rounds it (-776), as the check does

  Problem(const Case& cs, int mode, uint64_t seed)
      : c(cs),
        s(tilelink::gemm::packed(tilelink::gemm::GemmShape{cs.M, cs.N, cs.K, cs.lda, cs.ldb, cs.ldd})),
        A(size_t(s.M * s.lda)),
        B(size_t(s.N * s.ldb)),
        D(size_t(s.M * s.ldd)),
        ref(size_t(s.M * s.N)),
        absref(size_t(s.M * s.N)) {
    fill_random<T><<<256, 256>>>(A.ptr, s.M, s.K, s.lda, seed, mode);
    fill_random<T><<<256, 256>>>(B.ptr, s.N, s.K, s.ldb, seed ^ 0xABCDEFull, mode);
    dim3 grid(unsigned((s.N + 31) / 32), unsigned((s.M + 31) / 32));
    reference_gemm<T><<<grid, 256>>>(A.ptr, B.ptr, ref.ptr, absref.ptr, int(s.M), int(s.N), int(s.K), s.lda, s.ldb);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    href = ref.host();
    habs = absref.host();
  }
  void poison() {
    fill_value<T><<<256, 256>>>(D.ptr, int64_t(D.n), kPoison);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  CheckResult check(bool exact) { return check_d<T>(D.host(), href, habs, s.M, s.N, s.ldd, exact, kPoison); }
};

}  // namespace tltest
