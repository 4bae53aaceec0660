// moe_rs on in-process worlds of 1 to 8 ranks on the visible GPUs, against a float64 host
// reference: out_r[i] = Σ_src Σ_j topk_weights[t, j] · h_src[t*topk + j] · w_src[topk_ids[t, j]]ᵀ
// for rank r's tokens t = r * M/W + i, with h_src and w_src every rank's own slices. Fresh random
// inputs and routing every run, outputs poisoned first; odd token counts per rank, uniform,
// Zipf and one-hot routing, bf16 and fp16, both grouped tile shapes, the fused and (one GPU per
// rank) decomposed paths; an invalid expert id; bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "gpu/ops/moe_test_data.hpp"
#include "tilelink/testing/check.hpp"
#include "tilelink/ops/moe/moe_rs.hpp"

namespace tt = tilelink::test;
using namespace tilelink::test::moe;
using tilelink::Context;
using tilelink::DType;

namespace {

struct Case {
  DType dtype;
  int64_t m_per_rank, hidden, k_shard;
  int32_t experts, topk;
  Routing routing;
};

std::vector<float> random_weights(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> out(n);
  for (auto& x : out) x = u(rng);
  return out;
}

class MoeRs : public tt::WorldSizeTest {};

TEST_P(MoeRs, MatchesAFloat64ReferenceInEveryMode) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int world_size = ranks();
  int gpus = 0;
  TL_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  const std::vector<Case> cases = {
      {DType::bf16, 37, 136, 128, 8, 2, Routing::uniform},
      {DType::fp16, 24, 256, 64, 60, 4, Routing::zipf},
      {DType::bf16, 19, 512, 256, 16, 3, Routing::one_hot},
      {DType::bf16, 160, 512, 128, 2, 2, Routing::uniform},  // tall groups: the 128x256 tiles
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int64_t tokens = c.m_per_rank * world_size, entries = tokens * c.topk;
    const auto ids = route(c.routing, c.experts, c.topk, tokens, tt::mix_seed(seed, ci, 99));
    const auto weights = random_weights(size_t(entries), tt::mix_seed(seed, ci, 98));
    std::vector<std::vector<uint16_t>> h(static_cast<size_t>(world_size)), w(static_cast<size_t>(world_size));
    for (int r = 0; r < world_size; ++r) {
      h[size_t(r)] = random_values(c.dtype, size_t(entries * c.k_shard), tt::mix_seed(seed, ci, r, 1));
      w[size_t(r)] = random_values(c.dtype, size_t(c.experts * c.hidden * c.k_shard), tt::mix_seed(seed, ci, r, 2));
    }
    // Reference of every token's row, summed over the ranks' slices.
    std::vector<double> ref(size_t(tokens * c.hidden), 0.0);
    for (int src = 0; src < world_size; ++src)
      for (int64_t t = 0; t < tokens; ++t)
        for (int j = 0; j < c.topk; ++j) {
          const int64_t i = t * c.topk + j;
          const uint16_t* hr = h[size_t(src)].data() + i * c.k_shard;
          const uint16_t* we = w[size_t(src)].data() + int64_t(ids[size_t(i)]) * c.hidden * c.k_shard;
          for (int64_t col = 0; col < c.hidden; ++col) {
            double dot = 0;
            for (int64_t q = 0; q < c.k_shard; ++q) dot += from_bits(c.dtype, hr[q]) * from_bits(c.dtype, we[col * c.k_shard + q]);
            ref[size_t(t * c.hidden + col)] += weights[size_t(i)] * dot;
          }
        }
    // "rows": h handed over in another row order (as ag_moe's sorted layout), with each entry's row.
    std::vector<int32_t> perm(static_cast<size_t>(entries));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937_64(tt::mix_seed(seed, ci, 97)));
    std::vector<std::string> modes = {"fused", "rows"};
    if (gpus >= world_size && world_size > 1) modes.push_back("decomposed");
    for (const std::string& mode : modes) {
      std::vector<std::vector<uint16_t>> out(static_cast<size_t>(world_size));
      world().run([&](Context& ctx) {
        const int r = ctx.rank();
        void *dh, *dw, *dout;
        int32_t *dids, *drows = nullptr;
        float* dwts;
        const size_t out_bytes = size_t(c.m_per_rank * c.hidden * 2);
        TL_CUDA_CHECK(cudaMalloc(&dh, h[size_t(r)].size() * 2));
        std::vector<uint16_t> h_moved = h[size_t(r)];
        if (mode == "rows") {
          for (int64_t i = 0; i < entries; ++i)
            std::copy_n(h[size_t(r)].data() + i * c.k_shard, c.k_shard, h_moved.data() + int64_t(perm[size_t(i)]) * c.k_shard);
          TL_CUDA_CHECK(cudaMalloc(&drows, perm.size() * 4));
          tt::upload(drows, perm.data(), perm.size() * 4, ctx.stream());
        }
        TL_CUDA_CHECK(cudaMalloc(&dw, w[size_t(r)].size() * 2));
        TL_CUDA_CHECK(cudaMalloc(&dout, out_bytes));
        TL_CUDA_CHECK(cudaMalloc(&dids, ids.size() * 4));
        TL_CUDA_CHECK(cudaMalloc(&dwts, weights.size() * 4));
        tt::upload(dh, h_moved.data(), h_moved.size() * 2, ctx.stream());
        tt::upload(dw, w[size_t(r)].data(), w[size_t(r)].size() * 2, ctx.stream());
        tt::upload(dids, ids.data(), ids.size() * 4, ctx.stream());
        tt::upload(dwts, weights.data(), weights.size() * 4, ctx.stream());
        tt::poison_device(dout, out_bytes, 0xff, ctx.stream());
        tilelink::MoeRsOptions o;
        o.path = mode == "decomposed" ? tilelink::OpPath::decomposed : tilelink::OpPath::fused;
        tilelink::MoeRsArgs args{c.dtype, dh, dids, dwts, dw, dout, tokens, c.hidden, c.k_shard, c.experts, c.topk};
        args.h_rows = drows;
        // Twice: the second call reuses the buffers the first one handed over.
        for (int call = 0; call < 2; ++call) {
          tilelink::moe_rs(ctx, args, o);
          ctx.synchronize("moe_rs");
        }
        const auto bytes = tt::download(dout, out_bytes, ctx.stream());
        out[size_t(r)].assign(reinterpret_cast<const uint16_t*>(bytes.data()),
                              reinterpret_cast<const uint16_t*>(bytes.data()) + bytes.size() / 2);
        for (void* p : {dh, dw, dout, static_cast<void*>(dids), static_cast<void*>(dwts), static_cast<void*>(drows)})
          TL_CUDA_CHECK(cudaFree(p));
      });
      for (int r = 0; r < world_size; ++r) {
        const std::string what = "case " + std::to_string(ci) + " (" + tilelink::dtype_name(c.dtype) + ", " + mode +
                                 ", tokens/rank " + std::to_string(c.m_per_rank) + ", experts " +
                                 std::to_string(c.experts) + ", topk " + std::to_string(c.topk) + "), rank " +
                                 std::to_string(r);
        int64_t bad = 0;
        double worst = 0;
        // Each rank's GEMM rounds its rows to 16 bits before the weighted sums; the decomposed
        // path's reduce-scatter also adds in 16 bits.
        const double abs_tol = (mode == "fused" ? 0.05 : 0.1) * std::sqrt(double(world_size * c.topk));
        for (int64_t i = 0; i < c.m_per_rank * c.hidden; ++i) {
          const double want = ref[size_t(r * c.m_per_rank * c.hidden + i)];
          const double got = from_bits(c.dtype, out[size_t(r)][size_t(i)]);
          const double tol = abs_tol + 2e-2 * std::fabs(want);
          const double err = std::fabs(got - want);
          worst = std::max(worst, err / tol);
          if (!(err <= tol)) ++bad;
        }
        EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << c.m_per_rank * c.hidden << " outputs off (worst "
                          << worst << "x the bound)";
      }
    }
  }
}

TEST_P(MoeRs, AnInvalidExpertIdContributesNothingAndIsReported) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int world_size = ranks();
  const int64_t m = 4, hidden = 64, k_shard = 64;
  const int32_t experts = 4, topk = 2;
  const int64_t tokens = m * world_size;
  auto ids = route(Routing::uniform, experts, topk, tokens, tt::mix_seed(seed, 1));
  ids[0] = experts + 7;
  world().run([&](Context& ctx) {
    void *dh, *dw, *dout;
    int32_t* dids;
    float* dwts;
    TL_CUDA_CHECK(cudaMalloc(&dh, size_t(tokens * topk * k_shard * 2)));
    TL_CUDA_CHECK(cudaMalloc(&dw, size_t(experts * hidden * k_shard * 2)));
    TL_CUDA_CHECK(cudaMalloc(&dout, size_t(m * hidden * 2)));
    TL_CUDA_CHECK(cudaMalloc(&dids, ids.size() * 4));
    TL_CUDA_CHECK(cudaMalloc(&dwts, ids.size() * 4));
    tt::fill_uniform(DType::bf16, dh, tokens * topk * k_shard, tt::mix_seed(seed, ctx.rank(), 2), 1.0f, ctx.stream());
    tt::fill_uniform(DType::bf16, dw, experts * hidden * k_shard, tt::mix_seed(seed, ctx.rank(), 3), 1.0f, ctx.stream());
    const std::vector<float> ones(ids.size(), 1.0f);
    tt::upload(dwts, ones.data(), ones.size() * 4, ctx.stream());
    tt::upload(dids, ids.data(), ids.size() * 4, ctx.stream());
    tilelink::moe_rs(ctx, {DType::bf16, dh, dids, dwts, dw, dout, tokens, hidden, k_shard, experts, topk});
    try {
      tilelink::moe_rs_check(ctx);
      ADD_FAILURE() << "moe_rs_check accepted an invalid expert id";
    } catch (const tilelink::Error& e) {
      EXPECT_NE(std::string(e.what()).find("1 expert id(s) outside"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(tilelink::moe_rs_check(ctx));  // reported once
    for (void* p : {dh, dw, dout, static_cast<void*>(dids), static_cast<void*>(dwts)}) TL_CUDA_CHECK(cudaFree(p));
  });
}

TEST_P(MoeRs, BadArgumentsAreRefusedBeforeLaunch) {
  world().run([&](Context& ctx) {
    void* buf = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&buf, 1 << 20));
    auto refused = [&](tilelink::MoeRsArgs a, const char* what) {
      tt::expect_refused([&] { tilelink::moe_rs(ctx, a); }, "moe_rs", what);
    };
    const int64_t tokens = 4 * ctx.num_ranks();
    const tilelink::MoeRsArgs good{DType::bf16, buf, static_cast<int32_t*>(buf), static_cast<float*>(buf), buf, buf,
                                   tokens, 64, 64, 8, 2};
    auto a = good;
    a.topk = 9;
    refused(a, "topk > num_experts");
    a = good;
    a.k_shard = 12;
    refused(a, "k_shard not a multiple of 8");
    a = good;
    a.topk_weights = nullptr;
    refused(a, "no topk_weights");
    if (ctx.num_ranks() > 1) {
      a = good;
      a.tokens = tokens + 1;
      refused(a, "tokens not a multiple of the world size");
    }
    ctx.synchronize("moe_rs");
    TL_CUDA_CHECK(cudaFree(buf));
  });
}

TILELINK_WORLD_SIZES(MoeRs);

}  // namespace
