// flash_decode on in-process worlds of 1 to 8 ranks on the visible GPUs, against a float64 host
// reference over every rank's shard of the cache (concatenated in rank order). Fresh random
// inputs every run, outputs poisoned first; uneven shards (a rank with no tokens included),
// grouped-query attention with 1, 4 and 6 query heads per kv head, head_dim 64 and 128, bf16 and
// fp16, the automatic and forced chunk counts. Every rank must get the same output, bitwise.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/ops/flash_decode/flash_decode.hpp"

namespace tt = tilelink::test;
using tilelink::Context;
using tilelink::DType;

namespace {

struct Case {
  DType dtype;
  int64_t batch, q_heads, kv_heads, head_dim;
  std::vector<int64_t> kv_lens;  // per rank, cycled
  int splits;
};

uint16_t to_bits(DType dt, float f) {
  if (dt == DType::bf16) {
    const __nv_bfloat16 h = __float2bfloat16(f);
    return *reinterpret_cast<const uint16_t*>(&h);
  }
  const __half h = __float2half(f);
  return *reinterpret_cast<const uint16_t*>(&h);
}
float from_bits(DType dt, uint16_t b) {
  if (dt == DType::bf16) return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(&b));
  return __half2float(*reinterpret_cast<const __half*>(&b));
}

std::vector<uint16_t> random_values(DType dt, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = to_bits(dt, u(rng));
  return out;
}

class FlashDecode : public tt::WorldSizeTest {};

TEST_P(FlashDecode, MatchesAFloat64ReferenceOverEveryRanksShard) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int w = ranks();
  const std::vector<Case> cases = {
      {DType::bf16, 2, 8, 2, 128, {37, 138, 239}, 0},
      {DType::fp16, 1, 12, 2, 64, {0, 513}, 0},
      {DType::bf16, 3, 4, 4, 128, {1000}, 3},
      {DType::fp16, 2, 32, 8, 128, {4099, 2048}, 0},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int64_t g = c.q_heads / c.kv_heads, d = c.head_dim;
    const size_t q_elems = size_t(c.batch * c.q_heads * d);
    auto len_of = [&](int r) { return c.kv_lens[size_t(r) % c.kv_lens.size()]; };
    // Host copies of every rank's inputs.
    const auto q = random_values(c.dtype, q_elems, tt::mix_seed(seed, ci, 0));
    std::vector<std::vector<uint16_t>> k(w), v(w);
    for (int r = 0; r < w; ++r) {
      const size_t n = size_t(c.batch * len_of(r) * c.kv_heads * d);
      k[r] = random_values(c.dtype, n, tt::mix_seed(seed, ci, r, 1));
      v[r] = random_values(c.dtype, n, tt::mix_seed(seed, ci, r, 2));
    }
    // Reference.
    std::vector<double> ref(q_elems);
    const double scale = 1.0 / std::sqrt(double(d));
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.q_heads; ++h) {
        const int64_t hk = h / g;
        std::vector<double> scores;
        std::vector<const uint16_t*> vrows;
        for (int r = 0; r < w; ++r)
          for (int64_t t = 0; t < len_of(r); ++t) {
            const uint16_t* krow = k[r].data() + ((b * len_of(r) + t) * c.kv_heads + hk) * d;
            double s = 0;
            for (int64_t e = 0; e < d; ++e)
              s += double(from_bits(c.dtype, q[(b * c.q_heads + h) * d + e])) * from_bits(c.dtype, krow[e]);
            scores.push_back(s * scale);
            vrows.push_back(v[r].data() + ((b * len_of(r) + t) * c.kv_heads + hk) * d);
          }
        double mx = -INFINITY, sum = 0;
        for (double s : scores) mx = std::max(mx, s);
        for (double& s : scores) sum += (s = std::exp(s - mx));
        for (int64_t e = 0; e < d; ++e) {
          double o = 0;
          for (size_t i = 0; i < scores.size(); ++i) o += scores[i] * from_bits(c.dtype, vrows[i][e]);
          ref[(b * c.q_heads + h) * d + e] = scores.empty() ? 0.0 : o / sum;
        }
      }
    std::vector<std::vector<uint8_t>> outs(w);
    world().run([&](Context& ctx) {
      const int r = ctx.rank();
      void *dq, *dk = nullptr, *dv = nullptr, *dout;
      TL_CUDA_CHECK(cudaMalloc(&dq, q_elems * 2));
      TL_CUDA_CHECK(cudaMalloc(&dout, q_elems * 2));
      tt::upload(dq, q.data(), q_elems * 2, ctx.stream());
      if (!k[r].empty()) {
        TL_CUDA_CHECK(cudaMalloc(&dk, k[r].size() * 2));
        TL_CUDA_CHECK(cudaMalloc(&dv, v[r].size() * 2));
        tt::upload(dk, k[r].data(), k[r].size() * 2, ctx.stream());
        tt::upload(dv, v[r].data(), v[r].size() * 2, ctx.stream());
      }
      tt::poison_device(dout, q_elems * 2, 0xff, ctx.stream());
      tilelink::FlashDecodeOptions o;
      o.splits = c.splits;
      tilelink::flash_decode(ctx, {c.dtype, dq, dk, dv, dout, c.batch, c.q_heads, c.kv_heads, d, len_of(r)}, o);
      ctx.synchronize("flash_decode");
      outs[r] = tt::download(dout, q_elems * 2, ctx.stream());
      for (void* p : {dq, dk, dv, dout}) TL_CUDA_CHECK(cudaFree(p));
    });
    const std::string what = "case " + std::to_string(ci) + " (" + tilelink::dtype_name(c.dtype) + ", batch " +
                             std::to_string(c.batch) + ", heads " + std::to_string(c.q_heads) + "/" +
                             std::to_string(c.kv_heads) + ", head_dim " + std::to_string(d) + ")";
    int bad = 0;
    double worst = 0;
    const auto* got = reinterpret_cast<const uint16_t*>(outs[0].data());
    for (size_t i = 0; i < q_elems; ++i) {
      const double x = from_bits(c.dtype, got[i]), err = std::fabs(x - ref[i]);
      const double tol = 4e-3 + 8e-3 * std::fabs(ref[i]);
      worst = std::max(worst, err / tol);
      if (!(err <= tol)) ++bad;
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << q_elems << " outputs off (worst at " << worst
                      << "x the bound)";
    for (int r = 1; r < w; ++r)
      EXPECT_TRUE(tt::bytes_equal(outs[0].data(), outs[r].data(), outs[0].size(), what + ", rank " + std::to_string(r)));
  }
}

TEST_P(FlashDecode, BadArgumentsAreRefusedBeforeLaunch) {
  world().run([&](Context& ctx) {
    void* buf = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&buf, 1 << 20));
    auto refused = [&](tilelink::FlashDecodeArgs a, const char* what) {
      tt::expect_refused([&] { tilelink::flash_decode(ctx, a); }, "flash_decode", what);
    };
    const tilelink::FlashDecodeArgs good{DType::bf16, buf, buf, buf, buf, 1, 8, 2, 128, 16};
    auto a = good;
    a.head_dim = 96;
    refused(a, "head_dim 96");
    a = good;
    a.q_heads = 6;
    a.kv_heads = 4;
    refused(a, "q_heads not a multiple of kv_heads");
    a = good;
    a.q_heads = 64;
    a.kv_heads = 2;
    refused(a, "32 query heads per kv head");
    a = good;
    a.k = nullptr;
    refused(a, "no k");
    a = good;
    a.kv_len = -1;
    refused(a, "negative kv_len");
    ctx.synchronize("flash_decode");
    TL_CUDA_CHECK(cudaFree(buf));
  });
}

TILELINK_WORLD_SIZES(FlashDecode);

}  // namespace
