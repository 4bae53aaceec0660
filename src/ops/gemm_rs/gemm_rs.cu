// src/ops/gemm_rs/gemm_rs.cu — GEMM-ReduceScatter: pick the path, then fused_reduce.cu does it.
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"

#include "ops/common/fused_reduce.hpp"

namespace tilelink {
namespace {
constexpr const char* kOp = "gemm_rs";

ops::ReduceRequest request(const GemmRsArgs& a, const GemmRsOptions& o, RsSchedule sched) {
  return {kOp, a.dtype, a.a, a.b, a.c, a.m, a.n, a.k,
          sched.algo == RsAlgo::ring ? ops::ReduceAlgo::ring : ops::ReduceAlgo::full_mesh, sched.mode, o.comm_sms};
}
}  // namespace

ReducePath gemm_rs_choose_path(const Context& ctx, const GemmRsArgs& a) {
  // Rule (docs/OPS.md), from the H200 measurements (docs/PERF.md):
  //  * one GPU per rank (2 H200s over NVLink): fused ring/push won on every REFERENCE.md shape
  //    with its default SMs (1.23-1.48x over cuBLAS + NCCL reduce-scatter at K <= 2048 per rank,
  //    1.04-1.23x above);
  //  * ranks sharing a GPU (8 in-process ranks): fused ring/push won on every shape (1.28-1.42x
  //    over the GEMM followed by the same reduction);
  //  * in both, below ~10 GFLOP per rank a GEMM is too short to hide the reducer's fixed costs.
  if (ctx.num_ranks() == 1) return ReducePath::fused;
  const double flops = 2.0 * double(a.m) * double(a.n) * double(a.k);
  return (a.m / ctx.num_ranks() >= 64 && flops >= 1e10) ? ReducePath::fused : ReducePath::decomposed;
}

// Ring/push in both regimes (docs/PERF.md, reduction workers of one warp):
//  * one GPU per rank (2 H200s): 1.17-1.27x over full-mesh push and 1.35-1.52x over full-mesh
//    pull at the default SMs — remote stores only, no remote loads, and each unit is summed as
//    soon as the one predecessor arrived (full mesh waits for every peer's slot);
//  * ranks sharing a GPU (8 in-process ranks): 1.06-1.51x over full-mesh pull, the best of the
//    rest (before the reduction worked in warps, full-mesh pull led by 1.5-2.6x).
RsSchedule gemm_rs_choose_algo(const Context&) { return RsSchedule{RsAlgo::ring, CommMode::push}; }

void gemm_rs(Context& ctx, const GemmRsArgs& a, const GemmRsOptions& o) {
  const RsSchedule sched = o.algo == RsAlgo::automatic ? gemm_rs_choose_algo(ctx) : RsSchedule{o.algo, o.mode};
  const ops::ReduceRequest r = request(a, o, sched);
  ops::validate_reduce(ctx, r);
  auto& st = ctx.op_state<ops::ReduceState>(kOp);
  const ReducePath path = o.path == ReducePath::automatic ? gemm_rs_choose_path(ctx, a) : o.path;
  st.uniform.require(ctx, kOp,
                     {{"m", a.m}, {"n", a.n}, {"dtype", int64_t(a.dtype)}, {"path", int64_t(path)},
                      {"algo", int64_t(sched.algo)}, {"mode", int64_t(sched.mode)}, {"comm_sms", o.comm_sms}});
  if (path == ReducePath::fused) ops::fused_reduce(ctx, st, r);
  else ops::decomposed_reduce(ctx, st, r);
}

}  // namespace tilelink
