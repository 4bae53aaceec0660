// tilelink-bench ag_gemm — AllGather-GEMM against the sequential baseline, in one run.
//
// World 1: the fused op (GEMM + its tile waits, no communication) against cuBLAS on the same
// shape. World N (in-process ranks on the visible GPUs; all on one GPU when there is one): every
// mode against "copy, then cuBLAS" (each rank gathers with cudaMemcpyAsync, then cuBLAS), plus the
// copy alone and the GEMM alone, for % of ideal = max(T_gemm, T_copy) / T_op.
// Shapes: reference AG-GEMM (global M, N, K), with each rank's B the N/8 shard of TP8;
// --shapes small | decode (M 128, 512, 2048 on the same N, K) | random (--count N shapes drawn
// as the GEMM sweep draws them, the drawn N being each rank's; --seed S, else a fresh seed, printed;
// ends with auto's speed against the best other candidate, to check the rule on shapes nobody
// chose). "decomposed": the op's decomposed path; "auto": default options (the rule's choice).
// Peers reached only through NVSHMEM put-with-signal (--mpi with TILELINK_ONE_NODE_PER_PROCESS=1,
// or several nodes): the paths the op has there — the SM push over NVSHMEM and, with a GPU per
// rank, NCCL + cuBLAS. Processes sharing a GPU (--mpi on one GPU) have no sequential baseline
// (no NCCL, and no process can copy its peers' inputs): the SM modes against the GEMM alone.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/shape_sample.hpp"
#include "op_bench.hpp"
#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "tilelink/runtime/nccl.hpp"
#include "tilelink/testing/check.hpp"

namespace tilelink::bench {
namespace {

struct Shape {
  int64_t m, n, k;  // global M, full N (per rank n = N/8), K
};

const std::vector<Shape> kReferenceShapes = {
    {8192, 11008, 4096}, {8192, 14336, 4096}, {8192, 28672, 8192}, {8192, 53248, 16384}, {8192, 29568, 8192}};
const std::vector<Shape> kSmallShapes = {{2048, 11008, 4096}, {1024, 28672, 8192}};
// Decode-sized batches (reference: M in 128 … 2048 must not lose) on the same N, K.
std::vector<Shape> decode_shapes() {
  std::vector<Shape> v;
  for (int64_t m : {128, 512, 2048})
    for (const Shape& s : kReferenceShapes) v.push_back({m, s.n, s.k});
  return v;
}

struct RankData {
  void *a = nullptr, *b = nullptr, *c = nullptr, *gathered = nullptr;
  std::unique_ptr<test::CublasGemm> cublas;
};

int run(const Args& args) {
  const OpBenchOptions opt = op_bench_options(args);
  const DType dt = opt.dtype;
  const TimingOptions& topt = opt.timing;
  const int comm_sms = int(args.get_int("comm-sms", 0));      // 0: the op's default
  const int chunk_rows = int(args.get_int("chunk-rows", 0));  // 0: the op's default
  const std::string which = args.get("shapes", "reference");
  std::vector<Shape> shapes = which == "small" ? kSmallShapes : which == "decode" ? decode_shapes() : kReferenceShapes;
  std::vector<double> auto_vs_best, auto_vs_base;  // random shapes, world > 1
  const std::string header = std::string("# ag_gemm: C[M, N/8] = AllGather(A)[M, K] · B[N/8, K]^T, ") + dtype_name(dt) +
                             "; median of " + std::to_string(topt.samples) + " interleaved samples";
  for_each_world(args, header, {"ranks", "M", "N/8", "K", "candidate", "ms", "TFLOP/s", "vs_base", "%ideal"},
                 [&](BenchWorld& world, Table& table) {
    const int w = world.size();
    if (which == "random") {
      shapes.clear();
      const int count = int(args.get_int("count", 24));
      for (const DrawnShape& d : random_gemm_shapes(count, random_shape_seed(args, world, count)))
        shapes.push_back({d.m, 8 * d.n, d.k});
    }
    for (const Shape& s : shapes) {
      const int64_t m_per_rank = std::max<int64_t>(1, s.m / w), n = s.n / 8, k = s.k, m = m_per_rank * w;
      std::vector<RankData> rd(w);
      world.run([&](Context& ctx) {
        RankData& d = rd[ctx.rank()];
        TL_CUDA_CHECK(cudaMalloc(&d.a, m_per_rank * k * 2));
        TL_CUDA_CHECK(cudaMalloc(&d.b, n * k * 2));
        TL_CUDA_CHECK(cudaMalloc(&d.c, m * n * 2));
        TL_CUDA_CHECK(cudaMalloc(&d.gathered, m * k * 2));
        test::fill_uniform(dt, d.a, m_per_rank * k, 11 + ctx.rank(), 1.0f, ctx.stream());
        test::fill_uniform(dt, d.b, n * k, 101 + ctx.rank(), 1.0f, ctx.stream());
        test::fill_uniform(dt, d.gathered, m * k, 7, 1.0f, ctx.stream());
        d.cublas = std::make_unique<test::CublasGemm>(ctx.stream());
        ctx.synchronize("ag_gemm bench setup");
      });
      auto op = [&](CommMode mode, CommEngine engine, bool communicate, OpPath path = OpPath::fused) {
        return [&, mode, engine, communicate, path](Context& ctx) {
          RankData& d = rd[ctx.rank()];
          AgGemmOptions o;
          o.path = path;
          o.mode = mode;
          o.engine = engine;
          o.communicate = communicate;
          o.comm_sms = comm_sms;
          o.chunk_rows = chunk_rows;
          ag_gemm(ctx, {dt, d.a, d.b, d.c, m_per_rank, n, k}, o);
        };
      };
      // The baseline's gather: NCCL when every rank has its own GPU (what PyTorch users run),
      // else (ranks sharing a GPU, in-process) copy-engine copies of every rank's rows.
      auto copy = [&](Context& ctx) {
        RankData& d = rd[ctx.rank()];
        if (ctx.max_ranks_per_gpu() == 1 && w > 1) {
          nccl_check(ncclAllGather(d.a, d.gathered, size_t(m_per_rank * k), nccl_type(dt), nccl_comm(ctx),
                                   ctx.stream()),
                     ctx, "ncclAllGather");
          return;
        }
        for (int q = 0; q < w; ++q)
          TL_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(d.gathered) + q * m_per_rank * k * 2, rd[q].a,
                                        m_per_rank * k * 2, cudaMemcpyDefault, ctx.stream()));
      };
      auto gemm = [&](Context& ctx) {
        RankData& d = rd[ctx.rank()];
        d.cublas->run(dt, d.gathered, d.b, d.c, m, n, k);
      };
      bool nvshmem_only = false, gpu_per_rank = true;
      world.run([&](Context& ctx) {
        nvshmem_only = !ctx.peers_load_store();
        gpu_per_rank = ctx.max_ranks_per_gpu() == 1;
      });
      auto automatic = [&](Context& ctx) {
        RankData& d = rd[ctx.rank()];
        ag_gemm(ctx, {dt, d.a, d.b, d.c, m_per_rank, n, k});
      };
      std::vector<Candidate> cands;
      if (w > 1 && !gpu_per_rank && args.has("mpi")) {
        // Processes sharing a GPU: no NCCL, and a process cannot copy its peers' inputs itself.
        cands = {{"gemm_only", op(CommMode::push, CommEngine::sm, false)},
                 {"push/sm", op(CommMode::push, CommEngine::sm, true)}};
        if (!nvshmem_only) cands.push_back({"pull/sm", op(CommMode::pull, CommEngine::sm, true)});
        cands.push_back({"auto", automatic});
      } else if (w > 1 && nvshmem_only) {
        cands = {{"copy+cublas", [&](Context& ctx) { copy(ctx); gemm(ctx); }},
                 {"copy", copy},
                 {"cublas", gemm},
                 {"push/sm", op(CommMode::push, CommEngine::sm, true)},
                 {"gemm_only", op(CommMode::push, CommEngine::sm, false)},
                 {"decomposed", op(CommMode::push, CommEngine::sm, true, OpPath::decomposed)},
                 {"auto", automatic}};
      } else if (w == 1) {
        cands = {{"cublas", gemm}, {"fused", op(CommMode::push, CommEngine::copy_engine, true)}};
      } else {
        cands = {{"copy+cublas", [&](Context& ctx) { copy(ctx); gemm(ctx); }},
                 {"copy", copy},
                 {"cublas", gemm},
                 {"push/ce", op(CommMode::push, CommEngine::copy_engine, true)},
                 {"pull/ce", op(CommMode::pull, CommEngine::copy_engine, true)},
                 {"push/sm", op(CommMode::push, CommEngine::sm, true)},
                 {"pull/sm", op(CommMode::pull, CommEngine::sm, true)},
                 {"gemm_only", op(CommMode::push, CommEngine::copy_engine, false)},
                 {"decomposed", op(CommMode::push, CommEngine::sm, true, OpPath::decomposed)},
                 {"auto", automatic}};
      }
      const std::vector<double> ms = time_interleaved(world, cands, topt);
      const double base = ms[0];
      // Without a sequential baseline (first candidate gemm_only) the GEMM alone is the ideal.
      const bool sequential_baseline = w > 1 && cands[0].name == "copy+cublas";
      const double ideal = sequential_baseline ? std::max(ms[1], ms[2]) : ms[0];
      for (size_t i = 0; i < cands.size(); ++i) {
        // All ranks compute concurrently on the GPU(s): count every rank's FLOPs.
        const double tf = tflops(m, n * w, k, ms[i]);
        table.row({std::to_string(w), std::to_string(m), std::to_string(n), std::to_string(k), cands[i].name,
                   fmt(ms[i]), fmt(tf, 1), fmt(base / ms[i], 3), fmt(100.0 * ideal / ms[i], 1)});
      }
      if (sequential_baseline) {
        // auto (last) against the fastest way to the same result: the sequential baseline and
        // every path of the op (not the parts "copy", "cublas", "gemm_only").
        double best = ms[0];
        for (size_t i = 3; i + 1 < cands.size(); ++i)
          if (cands[i].name != "gemm_only") best = std::min(best, ms[i]);
        auto_vs_best.push_back(best / ms.back());
        auto_vs_base.push_back(base / ms.back());
      }
      world.run([&](Context& ctx) {
        ctx.synchronize("ag_gemm bench teardown");
        RankData& d = rd[ctx.rank()];
        d.cublas.reset();
        for (void* p : {d.a, d.b, d.c, d.gathered}) cudaFree(p);
      });
    }
    if (which == "random") print_rule_check(world, auto_vs_best, auto_vs_base);
  });
  return 0;
}

}  // namespace
}  // namespace tilelink::bench

TILELINK_BENCH_COMMAND(ag_gemm, "AllGather-GEMM: world 1 vs cuBLAS; N in-process ranks vs copy+cuBLAS",
                       tilelink::bench::run);
