// tilelink-bench flash_decode — decode attention over a KV cache split across the ranks.
//
// For each (batch, q heads / kv heads, tokens per sequence) every rank holds tokens / ranks of
// each sequence's cache (head_dim 128, bf16) and the call computes the attention of one query per
// sequence over all of them. Printed beside the time: the HBM floor of reading this rank's share
// of the cache (K and V bytes / 4.8 TB/s, the H200's peak), the share of it reached, and the
// floor of the whole cache on one GPU, which the strong-scaling goal compares against (2 GPUs at
// <= 0.55x the 1-GPU time at >= 256k tokens). --splits N forces the chunks per (sequence, kv head).
#include <cstdio>
#include <sstream>
#include <vector>

#include "op_bench.hpp"
#include "tilelink/ops/flash_decode/flash_decode.hpp"
#include "tilelink/testing/check.hpp"

namespace tilelink::bench {
namespace {

struct DecodeShape {
  int64_t batch, q_heads, kv_heads, tokens;
};

constexpr double kHbmBytesPerS = 4.8e12;

int run_flash_decode(const Args& args) {
  OpBenchOptions opt = op_bench_options(args);
  if (!args.has("reps")) opt.timing.reps = 10;
  if (!args.has("samples")) opt.timing.samples = 11;
  const std::vector<DecodeShape> shapes = {{1, 32, 8, 32768},  {1, 32, 8, 262144}, {1, 32, 8, 1048576},
                                           {4, 32, 8, 65536},  {16, 32, 8, 16384}, {1, 96, 12, 262144},
                                           {8, 96, 12, 65536}};
  const int64_t d = 128;
  FlashDecodeOptions fo;
  fo.splits = int(args.get_int("splits", 0));  // 0: the op's rule
  const std::string header = "# flash_decode: bf16, head_dim 128, one query per sequence; us per call, median of " +
                             std::to_string(opt.timing.samples) + " samples of " + std::to_string(opt.timing.reps) +
                             " calls; floor = K+V bytes / 4.8 TB/s";
  for_each_world(args, header,
                 {"ranks", "batch", "heads", "tokens", "us", "rank_floor_us", "%rank_floor", "1gpu_floor_us"},
                 [&](BenchWorld& world, Table& table) {
    const int w = world.size();
    for (const DecodeShape& s : shapes) {
      const int64_t local = (s.tokens + w - 1) / w;
      const size_t kv_elems = size_t(s.batch * local * s.kv_heads * d);
      std::vector<void*> q(w), k(w), v(w), out(w);
      world.run([&](Context& ctx) {
        const int r = ctx.rank();
        TL_CUDA_CHECK(cudaMalloc(&q[r], s.batch * s.q_heads * d * 2));
        TL_CUDA_CHECK(cudaMalloc(&out[r], s.batch * s.q_heads * d * 2));
        TL_CUDA_CHECK(cudaMalloc(&k[r], kv_elems * 2));
        TL_CUDA_CHECK(cudaMalloc(&v[r], kv_elems * 2));
        test::fill_uniform(DType::bf16, q[r], s.batch * s.q_heads * d, 7, 1.0f, ctx.stream());
        test::fill_uniform(DType::bf16, k[r], int64_t(kv_elems), 11 + r, 1.0f, ctx.stream());
        test::fill_uniform(DType::bf16, v[r], int64_t(kv_elems), 13 + r, 1.0f, ctx.stream());
        ctx.synchronize("bench setup");
      });
      const std::vector<Candidate> cands = {{"flash_decode", [&](Context& ctx) {
                                               const int r = ctx.rank();
                                               flash_decode(ctx, {DType::bf16, q[r], k[r], v[r], out[r], s.batch,
                                                                  s.q_heads, s.kv_heads, d, local}, fo);
                                             }}};
      const double ms = time_interleaved(world, cands, opt.timing)[0];
      const double rank_floor_us = double(kv_elems) * 2 * 2 / kHbmBytesPerS * 1e6;
      const double gpu_floor_us = double(s.batch * s.tokens * s.kv_heads * d) * 2 * 2 / kHbmBytesPerS * 1e6;
      table.row({std::to_string(w), std::to_string(s.batch), std::to_string(s.q_heads) + "/" + std::to_string(s.kv_heads),
                 std::to_string(s.tokens), fmt(ms * 1000.0, 1), fmt(rank_floor_us, 1),
                 fmt(100.0 * rank_floor_us / (ms * 1000.0), 1), fmt(gpu_floor_us, 1)});
      world.run([&](Context& ctx) {
        ctx.synchronize("bench teardown");
        const int r = ctx.rank();
        for (void* p : {q[r], k[r], v[r], out[r]}) cudaFree(p);
      });
    }
  });
  return 0;
}

}  // namespace
}  // namespace tilelink::bench

TILELINK_BENCH_COMMAND(flash_decode, "decode attention over a KV cache split across ranks (split-KV + allgather_ll)",
                       tilelink::bench::run_flash_decode);
