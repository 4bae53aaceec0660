// AllGather-GEMM across the processes of an MPI job, one GPU each:
//
//   mpirun -np 2 ./ag_gemm_mpi [m_per_rank n k]      (defaults 1024 3584 4096)
//
// Rank r owns rows [r·m, (r+1)·m) of A and the whole B; every rank computes C = AllGather(A)·Bᵀ
// with tilelink::ag_gemm, then checks sampled entries of C against a float reference on the host.
// The inputs are a pure function of (row, column), so every rank can compute any reference entry
// without receiving the other ranks' data.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "example_inputs.hpp"
#include "tilelink/runtime/world.hpp"

namespace {

using example::check;

// Values in [-1, 1) that differ between every (matrix, row, column).
float input_value(int matrix, int64_t row, int64_t col) {
  return example::hashed_value((uint64_t(matrix) << 56) ^ (uint64_t(row) << 28) ^ uint64_t(col));
}

std::vector<__nv_bfloat16> make_matrix(int matrix, int64_t row0, int64_t rows, int64_t cols) {
  std::vector<__nv_bfloat16> h(size_t(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) h[size_t(i * cols + j)] = __float2bfloat16(input_value(matrix, row0 + i, j));
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    tilelink::MpiWorld world(&argc, &argv);
    tilelink::Context& ctx = world.context();
    const int64_t m = argc > 3 ? std::atoll(argv[1]) : 1024;
    const int64_t n = argc > 3 ? std::atoll(argv[2]) : 3584;
    const int64_t k = argc > 3 ? std::atoll(argv[3]) : 4096;
    const int ranks = ctx.num_ranks(), me = ctx.rank();
    const int64_t rows = m * ranks;

    const auto a_host = make_matrix(0, me * m, m, k);  // this rank's rows of A
    const auto b_host = make_matrix(1, 0, n, k);
    void *a = nullptr, *b = nullptr, *c = nullptr;
    check(cudaMalloc(&a, a_host.size() * 2), "cudaMalloc A");
    check(cudaMalloc(&b, b_host.size() * 2), "cudaMalloc B");
    check(cudaMalloc(&c, size_t(rows * n) * 2), "cudaMalloc C");
    check(cudaMemcpy(a, a_host.data(), a_host.size() * 2, cudaMemcpyHostToDevice), "copy A");
    check(cudaMemcpy(b, b_host.data(), b_host.size() * 2, cudaMemcpyHostToDevice), "copy B");

    tilelink::ag_gemm(ctx, {tilelink::DType::bf16, a, b, c, m, n, k});
    ctx.synchronize("ag_gemm");

    std::vector<__nv_bfloat16> c_host(size_t(rows * n));
    check(cudaMemcpy(c_host.data(), c, c_host.size() * 2, cudaMemcpyDeviceToHost), "copy C");
    // 16 rows from every rank's block, 64 columns each, against a float reference.
    int bad = 0;
    double worst = 0;
    for (int q = 0; q < ranks; ++q)
      for (int s = 0; s < 16; ++s) {
        const int64_t i = q * m + (s * 7919) % m;
        for (int t = 0; t < 64; ++t) {
          const int64_t j = (t * 104729) % n;
          double ref = 0;
          for (int64_t l = 0; l < k; ++l)
            ref += double(__bfloat162float(__float2bfloat16(input_value(0, i, l)))) *
                   double(__bfloat162float(__float2bfloat16(input_value(1, j, l))));
          const double got = __bfloat162float(c_host[size_t(i * n + j)]);
          const double err = std::fabs(got - ref) / (1.0 + std::fabs(ref));
          worst = std::fmax(worst, err);
          bad += err > 2e-2;  // bf16 output: 8 bits of mantissa
        }
      }
    std::printf("rank %d/%d: ag_gemm M=%lld N=%lld K=%lld: %s (worst relative error %.2e over %d entries)\n", me,
                ranks, (long long)rows, (long long)n, (long long)k, bad ? "WRONG" : "ok", worst, ranks * 16 * 64);
    for (void* p : {a, b, c}) cudaFree(p);
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
