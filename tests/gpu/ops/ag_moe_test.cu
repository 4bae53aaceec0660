// ag_moe on in-process worlds of 1 to 8 ranks on the visible GPUs, against a float64 host
// reference: y[t*topk + j] = X[t] · w_r[topk_ids[t, j]]ᵀ with X every rank's tokens in rank order
// and w_r rank r's own weights. Fresh random inputs and routing every run, outputs poisoned
// first; odd token counts, uniform, Zipf-skewed and one-hot routing (experts with no tokens),
// bf16 and fp16, both grouped tile configurations, the fused and (one GPU per rank) decomposed
// paths, the sorted layout; bitwise against a call that does not communicate; invalid expert ids.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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
#include "tilelink/ops/moe/ag_moe.hpp"

namespace tt = tilelink::test;
using tilelink::Context;
using tilelink::DType;

namespace {

using namespace tilelink::test::moe;

struct Case {
  DType dtype;
  int64_t m_per_rank, hidden, n;
  int32_t experts, topk;
  Routing routing;
};

std::vector<int32_t> route(const Case& c, int64_t tokens, uint64_t seed) {
  return tilelink::test::moe::route(c.routing, c.experts, c.topk, tokens, seed);
}

struct RankData {
  std::vector<uint16_t> x, w;
};

class AgMoe : public tt::WorldSizeTest {};

TEST_P(AgMoe, MatchesAFloat64ReferenceInEveryMode) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int world_size = ranks();
  int gpus = 0;
  TL_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  const bool one_gpu_per_rank = gpus >= world_size;
  const std::vector<Case> cases = {
      {DType::bf16, 37, 256, 136, 8, 2, Routing::uniform},
      {DType::fp16, 24, 128, 384, 60, 4, Routing::zipf},
      {DType::bf16, 19, 128, 256, 16, 3, Routing::one_hot},
      {DType::bf16, 160, 256, 512, 2, 2, Routing::uniform},  // tall groups: the 128x256 tiles
      {DType::fp16, 130, 192, 272, 3, 1, Routing::zipf},
      {DType::bf16, 5, 128, 128, 16, 8, Routing::uniform},  // top-8, fewer tokens than gather blocks
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int64_t tokens = c.m_per_rank * world_size, entries = tokens * c.topk;
    const auto ids = route(c, tokens, tt::mix_seed(seed, ci, 99));
    std::vector<RankData> data(static_cast<size_t>(world_size));
    for (int r = 0; r < world_size; ++r) {
      data[size_t(r)].x = random_values(c.dtype, size_t(c.m_per_rank * c.hidden), tt::mix_seed(seed, ci, r, 1));
      data[size_t(r)].w = random_values(c.dtype, size_t(c.experts * c.n * c.hidden), tt::mix_seed(seed, ci, r, 2));
    }
    auto x_row = [&](int64_t t) { return data[size_t(t / c.m_per_rank)].x.data() + (t % c.m_per_rank) * c.hidden; };

    std::vector<std::string> modes = {"fused", "sorted"};
    if (one_gpu_per_rank) modes.push_back("decomposed");
    for (const std::string& mode : modes) {
      std::vector<std::vector<uint16_t>> out(static_cast<size_t>(world_size)), again(static_cast<size_t>(world_size));
      std::vector<std::vector<int32_t>> rows(static_cast<size_t>(world_size));
      world().run([&](Context& ctx) {
        const int r = ctx.rank();
        void *dx, *dw, *dy;
        int32_t *dids, *drows = nullptr;
        const size_t y_bytes = size_t(entries * c.n * 2);
        TL_CUDA_CHECK(cudaMalloc(&dx, data[size_t(r)].x.size() * 2));
        TL_CUDA_CHECK(cudaMalloc(&dw, data[size_t(r)].w.size() * 2));
        TL_CUDA_CHECK(cudaMalloc(&dy, y_bytes));
        TL_CUDA_CHECK(cudaMalloc(&dids, ids.size() * 4));
        tt::upload(dx, data[size_t(r)].x.data(), data[size_t(r)].x.size() * 2, ctx.stream());
        tt::upload(dw, data[size_t(r)].w.data(), data[size_t(r)].w.size() * 2, ctx.stream());
        tt::upload(dids, ids.data(), ids.size() * 4, ctx.stream());
        tt::poison_device(dy, y_bytes, 0xff, ctx.stream());
        tilelink::AgMoeArgs a{c.dtype, dx, dids, dw, dy, c.m_per_rank, c.hidden, c.n, c.experts, c.topk};
        if (mode == "sorted") {
          TL_CUDA_CHECK(cudaMalloc(&drows, size_t(entries) * 4));
          a.sorted_rows = drows;
        }
        tilelink::AgMoeOptions o;
        o.path = mode == "decomposed" ? tilelink::OpPath::decomposed : tilelink::OpPath::fused;
        tilelink::ag_moe(ctx, a, o);
        ctx.synchronize("ag_moe");
        auto bytes = tt::download(dy, y_bytes, ctx.stream());
        out[size_t(r)].assign(reinterpret_cast<uint16_t*>(bytes.data()), reinterpret_cast<uint16_t*>(bytes.data()) + bytes.size() / 2);
        if (drows) rows[size_t(r)] = tt::download_n(drows, size_t(entries), ctx.stream());
        // The same call without communication computes on the tokens gathered above: bitwise equal.
        tt::poison_device(dy, y_bytes, 0xff, ctx.stream());
        o.communicate = false;
        tilelink::ag_moe(ctx, a, o);
        ctx.synchronize("ag_moe");
        bytes = tt::download(dy, y_bytes, ctx.stream());
        again[size_t(r)].assign(reinterpret_cast<uint16_t*>(bytes.data()), reinterpret_cast<uint16_t*>(bytes.data()) + bytes.size() / 2);
        for (void* p : {dx, dw, dy, static_cast<void*>(dids), static_cast<void*>(drows)}) TL_CUDA_CHECK(cudaFree(p));
      });
      for (int r = 0; r < world_size; ++r) {
        const std::string what = "case " + std::to_string(ci) + " (" + tilelink::dtype_name(c.dtype) + ", " + mode +
                                 ", m_per_rank " + std::to_string(c.m_per_rank) + ", experts " +
                                 std::to_string(c.experts) + ", topk " + std::to_string(c.topk) + "), rank " +
                                 std::to_string(r);
        int64_t bad = 0;
        double worst = 0;
        for (int64_t i = 0; i < entries; ++i) {
          int64_t row = i;
          if (mode == "sorted") {
            row = rows[size_t(r)][size_t(i)];
            ASSERT_TRUE(row >= 0 && row < entries) << what << ": sorted row " << row << " of entry " << i;
          }
          const int64_t t = i / c.topk;
          const uint16_t* wt = data[size_t(r)].w.data() + int64_t(ids[size_t(i)]) * c.n * c.hidden;
          const uint16_t* xt = x_row(t);
          for (int64_t col = 0; col < c.n; ++col) {
            double ref = 0;
            for (int64_t h = 0; h < c.hidden; ++h) ref += from_bits(c.dtype, xt[h]) * from_bits(c.dtype, wt[col * c.hidden + h]);
            const double got = from_bits(c.dtype, out[size_t(r)][size_t(row * c.n + col)]);
            const double tol = 2e-2 + 8e-3 * std::fabs(ref);
            const double err = std::fabs(got - ref);
            worst = std::max(worst, err / tol);
            if (!(err <= tol)) ++bad;
          }
        }
        EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << entries * c.n << " outputs off (worst "
                          << worst << "x the bound)";
        EXPECT_TRUE(tt::bytes_equal(out[size_t(r)].data(), again[size_t(r)].data(), out[size_t(r)].size() * 2,
                                    what + ": without communication"));
      }
    }
  }
}

TEST_P(AgMoe, InvalidExpertIdsGiveNaNRowsAndAnErrorThenTheNextCallWorks) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int world_size = ranks();
  const Case c{DType::bf16, 8, 64, 64, 4, 2, Routing::uniform};
  const int64_t tokens = c.m_per_rank * world_size, entries = tokens * c.topk;
  auto ids = route(c, tokens, tt::mix_seed(seed, 1));
  const std::vector<int32_t> good_ids = ids;
  ids[1] = c.experts;  // out of range
  ids[size_t(entries - 1)] = -3;
  world().run([&](Context& ctx) {
    void *dx, *dw, *dy;
    int32_t* dids;
    const size_t y_bytes = size_t(entries * c.n * 2);
    TL_CUDA_CHECK(cudaMalloc(&dx, size_t(c.m_per_rank * c.hidden * 2)));
    TL_CUDA_CHECK(cudaMalloc(&dw, size_t(c.experts * c.n * c.hidden * 2)));
    TL_CUDA_CHECK(cudaMalloc(&dy, y_bytes));
    TL_CUDA_CHECK(cudaMalloc(&dids, ids.size() * 4));
    tt::fill_uniform(c.dtype, dx, c.m_per_rank * c.hidden, tt::mix_seed(seed, ctx.rank(), 3), 1.0f, ctx.stream());
    tt::fill_uniform(c.dtype, dw, int64_t(c.experts) * c.n * c.hidden, tt::mix_seed(seed, ctx.rank(), 4), 1.0f, ctx.stream());
    tt::upload(dids, ids.data(), ids.size() * 4, ctx.stream());
    const tilelink::AgMoeArgs a{c.dtype, dx, dids, dw, dy, c.m_per_rank, c.hidden, c.n, c.experts, c.topk};
    tilelink::ag_moe(ctx, a);
    ctx.synchronize("ag_moe");
    const auto y = tt::download(dy, y_bytes, ctx.stream());
    auto row_is_nan = [&](int64_t i) {
      const auto* v = reinterpret_cast<const uint16_t*>(y.data()) + i * c.n;
      for (int64_t col = 0; col < c.n; ++col)
        if (!std::isnan(from_bits(c.dtype, v[col]))) return false;
      return true;
    };
    EXPECT_TRUE(row_is_nan(1));
    EXPECT_TRUE(row_is_nan(entries - 1));
    EXPECT_FALSE(row_is_nan(0));
    try {
      tilelink::ag_moe_check(ctx);
      ADD_FAILURE() << "ag_moe_check accepted 2 invalid expert ids";
    } catch (const tilelink::Error& e) {
      EXPECT_NE(std::string(e.what()).find("2 expert id(s) outside"), std::string::npos) << e.what();
    }
    tt::upload(dids, good_ids.data(), good_ids.size() * 4, ctx.stream());
    tilelink::ag_moe(ctx, a);
    ctx.synchronize("ag_moe");
    EXPECT_NO_THROW(tilelink::ag_moe_check(ctx));
    for (void* p : {dx, dw, dy, static_cast<void*>(dids)}) TL_CUDA_CHECK(cudaFree(p));
  });
}

TEST_P(AgMoe, BadArgumentsAreRefusedBeforeLaunch) {
  world().run([&](Context& ctx) {
    void* buf = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&buf, 1 << 20));
    auto* ids = static_cast<int32_t*>(buf);
    auto refused = [&](tilelink::AgMoeArgs a, const char* what) {
      tt::expect_refused([&] { tilelink::ag_moe(ctx, a); }, "ag_moe", what);
    };
    const tilelink::AgMoeArgs good{DType::bf16, buf, ids, buf, buf, 4, 64, 64, 8, 2};
    auto a = good;
    a.topk = 9;
    refused(a, "topk > num_experts");
    a = good;
    a.topk = 0;
    refused(a, "topk 0");
    a = good;
    a.hidden = 60;
    refused(a, "hidden not a multiple of 8");
    a = good;
    a.num_experts = 0;
    refused(a, "no experts");
    a = good;
    a.topk_ids = nullptr;
    refused(a, "no topk_ids");
    a = good;
    a.x = static_cast<char*>(buf) + 2;
    refused(a, "misaligned x");
    ctx.synchronize("ag_moe");
    TL_CUDA_CHECK(cudaFree(buf));
  });
}

TILELINK_WORLD_SIZES(AgMoe);

}  // namespace
