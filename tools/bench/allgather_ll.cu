// tilelink-bench allgather_ll — the low-latency AllGather against NCCL's all-gather, in one run.
//
// Bytes per rank from 1 KiB to 1 MiB (--bytes a,b,c to choose). With one GPU per rank (--mpi, or
// in-process ranks on as many GPUs) NCCL's ncclAllGather is the baseline; ranks sharing a GPU
// have no NCCL, and only tilelink's time is printed. Each sample is a batch of back-to-back calls
// (--reps, default 20: latency is the point), the median over samples after warm-up.
#include <cstdio>
#include <sstream>
#include <vector>

#include "op_bench.hpp"
#include "tilelink/ops/allgather_ll/allgather_ll.hpp"
#include "tilelink/runtime/nccl.hpp"

namespace tilelink::bench {
namespace {

std::vector<int64_t> bytes_list(const Args& args) {
  std::vector<int64_t> out;
  std::stringstream ss(args.get("bytes", "1024,4096,16384,65536,262144,1048576"));
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

int run_allgather_ll(const Args& args) {
  OpBenchOptions opt = op_bench_options(args);
  if (!args.has("reps")) opt.timing.reps = 20;
  if (!args.has("samples")) opt.timing.samples = 15;
  const std::string header = "# allgather_ll: every rank's bytes to every rank; us per call, median of " +
                             std::to_string(opt.timing.samples) + " samples of " + std::to_string(opt.timing.reps) +
                             " back-to-back calls";
  for_each_world(args, header, {"ranks", "bytes/rank", "candidate", "us", "GB/s(out)", "vs_nccl"},
                 [&](BenchWorld& world, Table& table) {
    const int w = world.size();
    for (int64_t bytes : bytes_list(args)) {
      std::vector<void*> in(w), out(w);
      bool nccl = true;
      world.run([&](Context& ctx) {
        TL_CUDA_CHECK(cudaMalloc(&in[ctx.rank()], size_t(bytes)));
        TL_CUDA_CHECK(cudaMalloc(&out[ctx.rank()], size_t(bytes) * w));
        TL_CUDA_CHECK(cudaMemsetAsync(in[ctx.rank()], 0x3c + ctx.rank(), size_t(bytes), ctx.stream()));
        if (ctx.max_ranks_per_gpu() > 1) nccl = false;
        ctx.synchronize("bench setup");
      });
      std::vector<Candidate> cands;
      if (nccl && w > 1)
        cands.push_back({"nccl", [&](Context& ctx) {
                           nccl_check(ncclAllGather(in[ctx.rank()], out[ctx.rank()], size_t(bytes), ncclInt8,
                                                    nccl_comm(ctx), ctx.stream()),
                                      ctx, "ncclAllGather");
                         }});
      cands.push_back({"allgather_ll", [&](Context& ctx) {
                         allgather_ll(ctx, {in[ctx.rank()], out[ctx.rank()], bytes});
                       }});
      const std::vector<double> ms = time_interleaved(world, cands, opt.timing);
      for (size_t i = 0; i < cands.size(); ++i)
        table.row({std::to_string(w), std::to_string(bytes), cands[i].name, fmt(ms[i] * 1000.0, 2),
                   fmt(double(bytes) * w / (ms[i] * 1e6), 2), cands.size() > 1 ? fmt(ms[0] / ms[i], 2) : "-"});
      world.run([&](Context& ctx) {
        ctx.synchronize("bench teardown");
        cudaFree(in[ctx.rank()]);
        cudaFree(out[ctx.rank()]);
      });
    }
  });
  return 0;
}

}  // namespace
}  // namespace tilelink::bench

TILELINK_BENCH_COMMAND(allgather_ll, "low-latency AllGather (1 KiB - 1 MiB per rank) vs NCCL's all-gather",
                       tilelink::bench::run_allgather_ll);
