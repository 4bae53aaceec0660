// Decode attention over a KV cache split across the processes of an MPI job, one GPU each:
//
//   mpirun -np 2 ./flash_decode_mpi [batch tokens_per_rank]      (defaults 4 65536)
//
// Each sequence's cache is cut into one shard per rank ([batch, tokens, kv_heads, 128] on every
// rank, 32 query heads over 8 kv heads); the query of every sequence is the same on every rank.
// tilelink::flash_decode gives every rank the attention over the whole cache; each rank checks a
// few (sequence, head) rows against a float64 reference on the host. The inputs are a pure
// function of their coordinates, so every rank can compute any other rank's shard.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tilelink/ops/flash_decode/flash_decode.hpp"
#include "example_inputs.hpp"
#include "tilelink/runtime/world.hpp"

namespace {

using example::check;

constexpr int64_t kQHeads = 32, kKvHeads = 8, kDim = 128;

// Values in [-1, 1) that differ between every (tensor, a, b, c).
float input_value(int tensor, int64_t a, int64_t b, int64_t c) {
  return example::hashed_value((uint64_t(tensor) << 60) ^ (uint64_t(a) << 40) ^ (uint64_t(b) << 12) ^ uint64_t(c));
}
float rounded(float v) { return __bfloat162float(__float2bfloat16(v)); }

}  // namespace

int main(int argc, char** argv) {
  try {
    tilelink::MpiWorld world(&argc, &argv);
    tilelink::Context& ctx = world.context();
    const int64_t batch = argc > 2 ? std::atoll(argv[1]) : 4;
    const int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 65536;
    const int ranks = ctx.num_ranks(), me = ctx.rank();

    // q[b][h][d]; this rank's k, v[b][t][kv head][d], token t of the shard being token
    // me * tokens + t of the sequence.
    std::vector<__nv_bfloat16> q(size_t(batch * kQHeads * kDim)), k(size_t(batch * tokens * kKvHeads * kDim)),
        v(k.size());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < kQHeads; ++h)
        for (int64_t d = 0; d < kDim; ++d) q[size_t((b * kQHeads + h) * kDim + d)] = __float2bfloat16(input_value(0, b, h, d));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < kKvHeads; ++h)
          for (int64_t d = 0; d < kDim; ++d) {
            const size_t i = size_t(((b * tokens + t) * kKvHeads + h) * kDim + d);
            k[i] = __float2bfloat16(input_value(1, b, me * tokens + t, h * kDim + d));
            v[i] = __float2bfloat16(input_value(2, b, me * tokens + t, h * kDim + d));
          }
    void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr;
    check(cudaMalloc(&dq, q.size() * 2), "cudaMalloc q");
    check(cudaMalloc(&dk, k.size() * 2), "cudaMalloc k");
    check(cudaMalloc(&dv, v.size() * 2), "cudaMalloc v");
    check(cudaMalloc(&dout, q.size() * 2), "cudaMalloc out");
    check(cudaMemcpy(dq, q.data(), q.size() * 2, cudaMemcpyHostToDevice), "copy q");
    check(cudaMemcpy(dk, k.data(), k.size() * 2, cudaMemcpyHostToDevice), "copy k");
    check(cudaMemcpy(dv, v.data(), v.size() * 2, cudaMemcpyHostToDevice), "copy v");

    tilelink::flash_decode(ctx, {tilelink::DType::bf16, dq, dk, dv, dout, batch, kQHeads, kKvHeads, kDim, tokens});
    ctx.synchronize("flash_decode");

    std::vector<__nv_bfloat16> out(q.size());
    check(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost), "copy out");
    // A few (sequence, head) rows against a float64 reference over every rank's shard.
    int bad = 0;
    double worst = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h : {int64_t(0), kQHeads / 2 + 1, kQHeads - 1}) {
        const int64_t hk = h / (kQHeads / kKvHeads), all = tokens * ranks;
        std::vector<double> p(static_cast<size_t>(all));
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < all; ++t) {
          double s = 0;
          for (int64_t d = 0; d < kDim; ++d)
            s += double(rounded(input_value(0, b, h, d))) * rounded(input_value(1, b, t, hk * kDim + d));
          p[size_t(t)] = s / std::sqrt(double(kDim));
          mx = std::fmax(mx, p[size_t(t)]);
        }
        for (auto& x : p) sum += (x = std::exp(x - mx));
        for (int64_t d = 0; d < kDim; ++d) {
          double ref = 0;
          for (int64_t t = 0; t < all; ++t) ref += p[size_t(t)] * rounded(input_value(2, b, t, hk * kDim + d));
          ref /= sum;
          const double got = __bfloat162float(out[size_t((b * kQHeads + h) * kDim + d)]);
          const double err = std::fabs(got - ref);
          worst = std::fmax(worst, err);
          bad += err > 4e-3 + 8e-3 * std::fabs(ref);
        }
      }
    std::printf("rank %d/%d: flash_decode batch %lld, %lld tokens per sequence (%lld here), 32/8 heads: %s "
                "(worst error %.2e)\n",
                me, ranks, (long long)batch, (long long)(tokens * ranks), (long long)tokens, bad ? "WRONG" : "ok", worst);
    for (void* ptr : {dq, dk, dv, dout}) cudaFree(ptr);
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
