// tilelink-bench sp_attention — sequence-parallel attention: the fused op (K and V gathered chunk
// by chunk while the kernel runs) against the decomposed one (the whole gather, then the kernel:
// NCCL with one GPU per rank), and at one rank the attention kernel alone.
//
// For each (batch, total tokens, mask): zig-zag shards of total / ranks tokens, 32 query heads,
// 8 kv heads, head_dim 128, bf16. TF/s per rank counts the (query, visible key) pairs of its shard
// (causal: about total^2 / 2 / ranks, which zig-zag sharding balances). PyTorch's baselines
// (all-gather + SDPA, ring attention) are in bench/sp_attention.py.
#include <cstdio>
#include <vector>

#include "op_bench.hpp"
#include "tilelink/ops/sp_attention/sp_attention.hpp"
#include "tilelink/testing/check.hpp"

namespace tilelink::bench {
namespace {

struct SpShape {
  int64_t batch, tokens;
  bool causal;
};

int run_sp_attention(const Args& args) {
  OpBenchOptions opt = op_bench_options(args);
  if (!args.has("reps")) opt.timing.reps = 2;
  const std::vector<SpShape> shapes = {{1, 8192, true}, {4, 8192, true}, {1, 32768, true}, {1, 8192, false}};
  constexpr int64_t kQHeads = 32, kKvHeads = 8, kHeadDim = 128;
  const std::string header = "# sp_attention: bf16, 32/8 heads, head_dim 128, zig-zag shards; ms per call, median of " +
                             std::to_string(opt.timing.samples) + " samples of " + std::to_string(opt.timing.reps) +
                             " calls; fused vs decomposed (gather, then the kernel)";
  for_each_world(args, header, {"ranks", "batch", "tokens", "mask", "fused_ms", "decomposed_ms", "speedup", "TF/s/rank"},
                 [&](BenchWorld& world, Table& table) {
    const int w = world.size();
    for (const SpShape& s : shapes) {
      const int64_t local = s.tokens / w / 2 * 2;  // zig-zag: two chunks per rank
      const int64_t nq = s.batch * local * kQHeads * kHeadDim, nkv = s.batch * local * kKvHeads * kHeadDim;
      std::vector<void*> q(w), k(w), v(w), out(w);
      world.run([&](Context& ctx) {
        const int r = ctx.rank();
        for (auto [p, n] : {std::pair{&q[r], nq}, {&k[r], nkv}, {&v[r], nkv}, {&out[r], nq}})
          TL_CUDA_CHECK(cudaMalloc(p, size_t(n) * 2));
        test::fill_uniform(DType::bf16, q[r], nq, 17 + r, 1.0f, ctx.stream());
        test::fill_uniform(DType::bf16, k[r], nkv, 19 + r, 1.0f, ctx.stream());
        test::fill_uniform(DType::bf16, v[r], nkv, 23 + r, 1.0f, ctx.stream());
        ctx.synchronize("bench setup");
      });
      auto call = [&](OpPath path) {
        return [&, path](Context& ctx) {
          const int r = ctx.rank();
          SpAttentionArgs a;
          a.q = q[r], a.k = k[r], a.v = v[r], a.out = out[r];
          a.batch = s.batch, a.local_len = local, a.q_heads = kQHeads, a.kv_heads = kKvHeads, a.head_dim = kHeadDim;
          a.causal = s.causal;
          SpAttentionOptions o;
          o.path = path;
          sp_attention(ctx, a, o);
        };
      };
      const std::vector<Candidate> cands = {{"fused", call(OpPath::fused)}, {"decomposed", call(OpPath::decomposed)}};
      const std::vector<double> ms = time_interleaved(world, cands, opt.timing);
      const double pairs = s.causal ? double(s.tokens) * double(s.tokens + 1) / 2.0 / w : double(s.tokens) * local;
      const double tf = 4.0 * double(s.batch * kQHeads * kHeadDim) * pairs / (ms[0] * 1e-3) / 1e12;
      table.row({std::to_string(w), std::to_string(s.batch), std::to_string(s.tokens), s.causal ? "causal" : "full",
                 fmt(ms[0]), fmt(ms[1]), fmt(ms[1] / ms[0], 2), fmt(tf, 0)});
      world.run([&](Context& ctx) {
        ctx.synchronize("bench teardown");
        const int r = ctx.rank();
        for (void* p : {q[r], k[r], v[r], out[r]}) cudaFree(p);
      });
    }
  }, 2048);
  return 0;
}

}  // namespace
}  // namespace tilelink::bench

TILELINK_BENCH_COMMAND(sp_attention, "sequence-parallel attention: fused (gather beside the kernel) vs decomposed",
                       tilelink::bench::run_sp_attention);
