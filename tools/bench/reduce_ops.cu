// tilelink-bench gemm_rs | gemm_ar — GEMM-ReduceScatter / GEMM-AllReduce against the sequential
// baseline, in one run.
//
// World 1: the fused op (GEMM + its tile notifications) against cuBLAS. World N (in-process ranks):
// every path against "sequential" (cuBLAS, then NCCL's collective when every rank has its own
// GPU; the op's decomposed path — cuBLAS, then tilelink's reduction kernel — when ranks share
// one), plus cuBLAS alone; % of ideal = max(T_gemm, T_reduce) / T_op with
// T_reduce = T_sequential - T_gemm.
// gemm_rs shapes: reference GEMM-RS (M, N, global K; each rank's K is K/8 as in TP8).
// gemm_ar shapes: decode batches M in {128 … 2048} of a TP8 row-parallel layer (N 8192, K 28672/8).
// --shapes random: --count N shapes drawn as the GEMM sweep draws them (the drawn K being each
// rank's, M rounded to whole rows per rank); --seed S, else a fresh seed, printed; ends with
// auto's speed against the best other candidate, to check the rules on shapes nobody chose.
// Peers reached only through NVSHMEM put-with-signal (--mpi with TILELINK_ONE_NODE_PER_PROCESS=1,
// or several nodes): the paths there — gemm_rs's full-mesh push and gemm_ar's two-shot push, each
// fused and decomposed.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "bench/shape_sample.hpp"
#include "op_bench.hpp"
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"
#include "tilelink/runtime/nccl.hpp"
#include "tilelink/testing/check.hpp"

namespace tilelink::bench {
namespace {

struct Shape {
  int64_t m, n, k;  // M, N, global K (per rank k = K/8)
};

const std::vector<Shape> kRsShapes = {{8192, 4096, 11008}, {8192, 4096, 14336}, {8192, 3584, 14336},
                                      {8192, 4608, 36864}, {8192, 8192, 28672}, {8192, 8192, 29568}};
const std::vector<Shape> kArShapes = {{128, 8192, 28672},  {256, 8192, 28672},  {512, 8192, 28672},
                                      {1024, 8192, 28672}, {2048, 8192, 28672}};

struct RankData {
  void *a = nullptr, *b = nullptr, *c = nullptr, *full = nullptr;
  std::unique_ptr<test::CublasGemm> cublas;
};

int run_reduce(const Args& args, bool all_reduce) {
  const OpBenchOptions opt = op_bench_options(args);
  const DType dt = opt.dtype;
  const TimingOptions& topt = opt.timing;
  std::vector<Shape> shapes = all_reduce ? kArShapes : kRsShapes;
  const bool random = args.get("shapes", "reference") == "random";
  std::vector<double> auto_vs_best, auto_vs_base;  // random shapes, world > 1
  const char* op = all_reduce ? "gemm_ar" : "gemm_rs";
  const int comm_sms = int(args.get_int("comm-sms", 0));  // reduction blocks; 0: the op's default
  const std::string header = std::string("# ") + op + ": " + (all_reduce ? "AllReduce" : "ReduceScatter") +
                             " of A[M, K/8] · B[N, K/8]^T over the ranks, " + dtype_name(dt) + "; median of " +
                             std::to_string(topt.samples) + " interleaved samples";
  for_each_world(args, header, {"ranks", "M", "N", "K/8", "candidate", "ms", "TFLOP/s", "vs_base", "%ideal"},
                 [&](BenchWorld& world, Table& table) {
    const int w = world.size();
    if (random) {
      shapes.clear();
      // The drawn K is each rank's; M is rounded to whole rows per rank.
      const int count = int(args.get_int("count", 24));
      for (const DrawnShape& d : random_gemm_shapes(count, random_shape_seed(args, world, count)))
        shapes.push_back({std::max<int64_t>(w, (d.m + w / 2) / w * w), d.n, 8 * d.k});
    }
    for (const Shape& s : shapes) {
      const int64_t m = s.m, n = s.n, k = s.k / 8;
      const int64_t out_rows = all_reduce || w == 1 ? m : m / w;
      std::vector<RankData> rd(w);
      world.run([&](Context& ctx) {
        RankData& d = rd[ctx.rank()];
        TL_CUDA_CHECK(cudaMalloc(&d.a, m * k * 2));
        TL_CUDA_CHECK(cudaMalloc(&d.b, n * k * 2));
        TL_CUDA_CHECK(cudaMalloc(&d.c, out_rows * n * 2));
        TL_CUDA_CHECK(cudaMalloc(&d.full, m * n * 2));
        test::fill_uniform(dt, d.a, m * k, 31 + ctx.rank(), 1.0f, ctx.stream());
        test::fill_uniform(dt, d.b, n * k, 131 + ctx.rank(), 1.0f, ctx.stream());
        d.cublas = std::make_unique<test::CublasGemm>(ctx.stream());
        ctx.synchronize("bench setup");
      });
      auto rs = [&](ReducePath path, RsAlgo algo, CommMode mode) {
        return [&, path, algo, mode](Context& ctx) {
          RankData& d = rd[ctx.rank()];
          GemmRsOptions o;
          o.path = path;
          o.algo = algo;
          o.mode = mode;
          o.comm_sms = comm_sms;
          gemm_rs(ctx, {dt, d.a, d.b, d.c, m, n, k}, o);
        };
      };
      auto ar = [&](ReducePath path, ArAlgo algo) {
        return [&, path, algo](Context& ctx) {
          RankData& d = rd[ctx.rank()];
          GemmArOptions o;
          o.path = path;
          o.algo = algo;
          o.comm_sms = comm_sms;
          gemm_ar(ctx, {dt, d.a, d.b, d.c, m, n, k}, o);
        };
      };
      auto gemm = [&](Context& ctx) {
        RankData& d = rd[ctx.rank()];
        d.cublas->run(dt, d.a, d.b, d.full, m, n, k);
      };
      bool nvshmem_only = false;
      world.run([&](Context& ctx) { nvshmem_only = !ctx.peers_load_store(); });
      // Over NVSHMEM put-with-signal only the full-mesh push and the two-shot push run.
      const RsAlgo rs_algo = nvshmem_only ? RsAlgo::full_mesh : RsAlgo::ring;
      const ArAlgo ar_algo = nvshmem_only ? ArAlgo::two_shot : ArAlgo::one_shot;
      // What a user runs without tilelink: cuBLAS, then NCCL (one GPU per rank; NCCL cannot run
      // two ranks on one GPU, so there the op's own decomposed path stands in).
      std::function<void(Context&)> decomposed = rs(ReducePath::decomposed, rs_algo, CommMode::push);
      if (all_reduce) decomposed = ar(ReducePath::decomposed, ar_algo);
      auto sequential = [&, decomposed](Context& ctx) {
        if (ctx.max_ranks_per_gpu() > 1) return decomposed(ctx);
        RankData& d = rd[ctx.rank()];
        gemm(ctx);
        if (all_reduce)
          nccl_check(ncclAllReduce(d.full, d.c, size_t(m * n), nccl_type(dt), ncclSum, nccl_comm(ctx), ctx.stream()),
                     ctx, "ncclAllReduce");
        else
          nccl_check(ncclReduceScatter(d.full, d.c, size_t(m / w * n), nccl_type(dt), ncclSum, nccl_comm(ctx),
                                       ctx.stream()),
                     ctx, "ncclReduceScatter");
      };
      std::vector<Candidate> cands;
      if (w == 1) {
        std::function<void(Context&)> fused = rs(ReducePath::fused, rs_algo, CommMode::push);
        if (all_reduce) fused = ar(ReducePath::fused, ArAlgo::one_shot);
        cands = {{"cublas", gemm}, {"fused", fused}};
      } else if (all_reduce && nvshmem_only) {
        cands = {{"sequential", sequential},
                 {"cublas", gemm},
                 {"decomposed", decomposed},
                 {"two_shot", ar(ReducePath::fused, ArAlgo::two_shot)},
                 {"auto", ar(ReducePath::automatic, ArAlgo::automatic)}};
      } else if (all_reduce) {
        cands = {{"sequential", sequential},
                 {"cublas", gemm},
                 {"decomposed", decomposed},
                 {"one_shot", ar(ReducePath::fused, ArAlgo::one_shot)},
                 {"two_shot", ar(ReducePath::fused, ArAlgo::two_shot)},
                 {"auto", ar(ReducePath::automatic, ArAlgo::automatic)}};
      } else if (nvshmem_only) {
        cands = {{"sequential", sequential},
                 {"cublas", gemm},
                 {"decomposed", decomposed},
                 {"mesh/push", rs(ReducePath::fused, RsAlgo::full_mesh, CommMode::push)},
                 {"auto", rs(ReducePath::automatic, RsAlgo::automatic, CommMode::push)}};
      } else {
        cands = {{"sequential", sequential},
                 {"cublas", gemm},
                 {"decomposed", decomposed},
                 {"ring/push", rs(ReducePath::fused, RsAlgo::ring, CommMode::push)},
                 {"ring/pull", rs(ReducePath::fused, RsAlgo::ring, CommMode::pull)},
                 {"mesh/push", rs(ReducePath::fused, RsAlgo::full_mesh, CommMode::push)},
                 {"mesh/pull", rs(ReducePath::fused, RsAlgo::full_mesh, CommMode::pull)},
                 {"auto", rs(ReducePath::automatic, RsAlgo::automatic, CommMode::push)}};
      }
      const std::vector<double> ms = time_interleaved(world, cands, topt);
      const double base = ms[0];
      const double ideal = w == 1 ? ms[0] : std::max(ms[1], std::max(0.0, ms[0] - ms[1]));
      for (size_t i = 0; i < cands.size(); ++i)
        table.row({std::to_string(w), std::to_string(m), std::to_string(n), std::to_string(k), cands[i].name,
                   fmt(ms[i]), fmt(tflops(m, n, k * w, ms[i]), 1), fmt(base / ms[i], 3),
                   fmt(100.0 * ideal / ms[i], 1)});
      if (w > 1) {
        // auto (last) against the fastest way to the same result: sequential and every path.
        double best = ms[0];
        for (size_t i = 2; i + 1 < cands.size(); ++i) best = std::min(best, ms[i]);
        auto_vs_best.push_back(best / ms.back());
        auto_vs_base.push_back(base / ms.back());
      }
      world.run([&](Context& ctx) {
        ctx.synchronize("bench teardown");
        RankData& d = rd[ctx.rank()];
        d.cublas.reset();
        for (void* p : {d.a, d.b, d.c, d.full}) cudaFree(p);
      });
    }
    if (random) print_rule_check(world, auto_vs_best, auto_vs_base);
  });
  return 0;
}

int run_rs(const Args& args) { return run_reduce(args, false); }
int run_ar(const Args& args) { return run_reduce(args, true); }

}  // namespace
}  // namespace tilelink::bench

TILELINK_BENCH_COMMAND(gemm_rs, "GEMM-ReduceScatter: world 1 vs cuBLAS; N in-process ranks vs decomposed",
                       tilelink::bench::run_rs);
TILELINK_BENCH_COMMAND(gemm_ar, "GEMM-AllReduce (decode M): world 1 vs cuBLAS; N in-process ranks vs decomposed",
                       tilelink::bench::run_ar);
