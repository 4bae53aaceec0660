// tilelink-bench ag_moe | moe_rs — the two GEMMs of a tensor-parallel mixture-of-experts layer.
//
// ag_moe: AllGather + grouped GEMM.
// For each model shape (hidden H, intermediate I, experts E, top-k) and token count M (over all
// ranks), every rank holds M / ranks tokens and its I / ranks slice of the fused gate+up weights
// (n = 2 I / ranks), and the routing is uniform random (--routing zipf for a skewed one). Printed:
// the fused op, the decomposed one (NCCL + the same grouped GEMM; one GPU per rank only) and the
// grouped GEMM alone on the tokens of the last call (communicate = false), with its TFLOP/s over
// the useful rows (M x topk).
// moe_rs: grouped GEMM + top-k weighted sum + ReduceScatter, h [M x topk, I / ranks] per rank,
// down projection [E, H, I / ranks]; the fused op and the decomposed one (GEMM, sums, NCCL).
#include <cstdio>
#include <vector>

#include "op_bench.hpp"
#include "tilelink/ops/moe/ag_moe.hpp"
#include "tilelink/ops/moe/moe_rs.hpp"
#include "tilelink/testing/check.hpp"
#include "tilelink/testing/moe_routing.hpp"

namespace tilelink::bench {
namespace {

struct MoeShape {
  const char* model;
  int64_t hidden, intermediate;
  int32_t experts, topk;
};

std::vector<int32_t> routing(int64_t tokens, int32_t experts, int32_t topk, bool zipf, uint64_t seed) {
  return test::random_routing(zipf ? test::Routing::zipf : test::Routing::uniform, experts, topk, tokens, seed);
}

const std::vector<MoeShape> kShapes = {{"Qwen1.5-MoE-A2.7B", 2048, 1408, 60, 4}, {"Mixtral-8x7B", 4096, 14336, 8, 2},
                                       {"Mixtral-8x22B", 6144, 16384, 8, 2},    {"DeepSeek-MoE-16B", 2048, 1408, 64, 6},
                                       {"DeepSeek-V3", 7168, 2048, 256, 8},      {"Qwen3-30B-A3B", 2048, 768, 128, 8}};

std::vector<int64_t> token_counts(const Args& args) {
  if (args.has("tokens")) return {args.get_int("tokens", 8192)};
  return {1024, 8192};
}

int run_ag_moe(const Args& args) {
  OpBenchOptions opt = op_bench_options(args);
  const bool zipf = args.get("routing", "uniform") == "zipf";
  const std::vector<MoeShape>& shapes = kShapes;
  const std::string header = std::string("# ag_moe: ") + dtype_name(opt.dtype) + ", gate+up (n = 2I/ranks), " +
                             (zipf ? "Zipf" : "uniform") + " routing; ms per call, median of " +
                             std::to_string(opt.timing.samples) + " samples";
  for_each_world(args, header,
                 {"ranks", "model", "M", "fused_ms", "decomposed_ms", "gemm_only_ms", "gemm_TFLOPs", "fused/decomp"},
                 [&](BenchWorld& world, Table& table) {
    const int w = world.size();
    int gpus = 0;
    TL_CUDA_CHECK(cudaGetDeviceCount(&gpus));
    for (const MoeShape& s : shapes) {
      for (const int64_t m : token_counts(args)) {
        const int64_t m_per_rank = m / w, n = 2 * s.intermediate / w;
        if (m_per_rank == 0 || n % 8 != 0) continue;
        const int64_t entries = m_per_rank * w * s.topk;
        const auto ids = routing(m_per_rank * w, s.experts, s.topk, zipf, 17);
        std::vector<void*> x(w), wt(w), y(w);
        std::vector<int32_t*> dids(w);
        world.run([&](Context& ctx) {
          const int r = ctx.rank();
          TL_CUDA_CHECK(cudaMalloc(&x[r], m_per_rank * s.hidden * 2));
          TL_CUDA_CHECK(cudaMalloc(&wt[r], int64_t(s.experts) * n * s.hidden * 2));
          TL_CUDA_CHECK(cudaMalloc(&y[r], entries * n * 2));
          TL_CUDA_CHECK(cudaMalloc(&dids[r], ids.size() * 4));
          test::fill_uniform(opt.dtype, x[r], m_per_rank * s.hidden, 5 + r, 1.0f, ctx.stream());
          test::fill_uniform(opt.dtype, wt[r], int64_t(s.experts) * n * s.hidden, 9 + r, 0.05f, ctx.stream());
          TL_CUDA_CHECK(cudaMemcpyAsync(dids[r], ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, ctx.stream()));
          ctx.synchronize("bench setup");
        });
        auto call = [&](OpPath path, bool communicate) {
          return [&, path, communicate](Context& ctx) {
            const int r = ctx.rank();
            AgMoeOptions o;
            o.path = path;
            o.communicate = communicate;
            ag_moe(ctx, {opt.dtype, x[r], dids[r], wt[r], y[r], m_per_rank, s.hidden, n, s.experts, s.topk}, o);
          };
        };
        const bool decomposed = w > 1 && gpus >= w;
        std::vector<Candidate> cands = {{"fused", call(OpPath::fused, true)}};
        if (decomposed) cands.push_back({"decomposed", call(OpPath::decomposed, true)});
        cands.push_back({"gemm_only", call(OpPath::fused, false)});
        const std::vector<double> ms = time_interleaved(world, cands, opt.timing);
        const double gemm_ms = ms.back();
        table.row({std::to_string(w), s.model, std::to_string(m), fmt(ms[0], 3), decomposed ? fmt(ms[1], 3) : "-",
                   fmt(gemm_ms, 3), fmt(tflops(entries, n, s.hidden, gemm_ms), 0),
                   decomposed ? fmt(ms[1] / ms[0], 2) : "-"});
        world.run([&](Context& ctx) {
          ctx.synchronize("bench teardown");
          const int r = ctx.rank();
          for (void* p : {x[r], wt[r], y[r], static_cast<void*>(dids[r])}) cudaFree(p);
        });
      }
    }
  }, /*default_heap_mb=*/4096);  // every rank sorts all M x topk token rows
  return 0;
}

int run_moe_rs(const Args& args) {
  OpBenchOptions opt = op_bench_options(args);
  const bool zipf = args.get("routing", "uniform") == "zipf";
  const std::string header = std::string("# moe_rs: ") + dtype_name(opt.dtype) + ", down projection (k_shard = I/ranks), " +
                             (zipf ? "Zipf" : "uniform") + " routing; ms per call, median of " +
                             std::to_string(opt.timing.samples) + " samples";
  for_each_world(args, header, {"ranks", "model", "M", "fused_ms", "decomposed_ms", "fused/decomp"},
                 [&](BenchWorld& world, Table& table) {
    const int w = world.size();
    int gpus = 0;
    TL_CUDA_CHECK(cudaGetDeviceCount(&gpus));
    for (const MoeShape& s : kShapes) {
      for (const int64_t m : token_counts(args)) {
        const int64_t tokens = m / w * w, k_shard = s.intermediate / w;
        if (tokens == 0 || k_shard % 8 != 0) continue;
        const int64_t entries = tokens * s.topk;
        const auto ids = routing(tokens, s.experts, s.topk, zipf, 17);
        const std::vector<float> weights(ids.size(), 1.0f / float(s.topk));
        std::vector<void*> h(w), wt(w), out(w);
        std::vector<int32_t*> dids(w);
        std::vector<float*> dwts(w);
        world.run([&](Context& ctx) {
          const int r = ctx.rank();
          TL_CUDA_CHECK(cudaMalloc(&h[r], entries * k_shard * 2));
          TL_CUDA_CHECK(cudaMalloc(&wt[r], int64_t(s.experts) * s.hidden * k_shard * 2));
          TL_CUDA_CHECK(cudaMalloc(&out[r], tokens / w * s.hidden * 2));
          TL_CUDA_CHECK(cudaMalloc(&dids[r], ids.size() * 4));
          TL_CUDA_CHECK(cudaMalloc(&dwts[r], ids.size() * 4));
          test::fill_uniform(opt.dtype, h[r], entries * k_shard, 5 + r, 1.0f, ctx.stream());
          test::fill_uniform(opt.dtype, wt[r], int64_t(s.experts) * s.hidden * k_shard, 9 + r, 0.05f, ctx.stream());
          TL_CUDA_CHECK(cudaMemcpyAsync(dids[r], ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, ctx.stream()));
          TL_CUDA_CHECK(cudaMemcpyAsync(dwts[r], weights.data(), weights.size() * 4, cudaMemcpyHostToDevice, ctx.stream()));
          ctx.synchronize("bench setup");
        });
        auto call = [&](OpPath path) {
          return [&, path](Context& ctx) {
            const int r = ctx.rank();
            MoeRsOptions o;
            o.path = path;
            moe_rs(ctx, {opt.dtype, h[r], dids[r], dwts[r], wt[r], out[r], tokens, s.hidden, k_shard, s.experts, s.topk}, o);
          };
        };
        const bool decomposed = w > 1 && gpus >= w;
        std::vector<Candidate> cands = {{"fused", call(OpPath::fused)}};
        if (decomposed) cands.push_back({"decomposed", call(OpPath::decomposed)});
        const std::vector<double> ms = time_interleaved(world, cands, opt.timing);
        table.row({std::to_string(w), s.model, std::to_string(tokens), fmt(ms[0], 3), decomposed ? fmt(ms[1], 3) : "-",
                   decomposed ? fmt(ms[1] / ms[0], 2) : "-"});
        world.run([&](Context& ctx) {
          ctx.synchronize("bench teardown");
          const int r = ctx.rank();
          for (void* p : {h[r], wt[r], out[r], static_cast<void*>(dids[r]), static_cast<void*>(dwts[r])}) cudaFree(p);
        });
      }
    }
  }, /*default_heap_mb=*/4096);
  return 0;
}

}  // namespace
}  // namespace tilelink::bench

TILELINK_BENCH_COMMAND(moe_rs, "grouped GEMM + top-k reduce + ReduceScatter (tensor-parallel MoE, second GEMM) [--routing zipf] [--tokens M]",
                       tilelink::bench::run_moe_rs);

TILELINK_BENCH_COMMAND(ag_moe, "AllGather + grouped GEMM (tensor-parallel MoE, first GEMM) [--routing zipf] [--tokens M]",
                       tilelink::bench::run_ag_moe);
