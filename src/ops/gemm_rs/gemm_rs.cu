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
  //  * one GPU per rank (2 H200s over NVLink): the decomposed path (GEMM, then NCCL
  //    reduce-scatter) won on every REFERENCE.md shape — the fused reduction on ~18 SMs reached
  //    0.41-0.53x of it at short K and ~0.9x at K >= 3584 — so it is chosen there;
  //  * ranks sharing a GPU (in-process): fused won on every shape (1.9-3.0x) from M/W >= 64 rows;
  //    below ~10 GFLOP per rank a GEMM is too short to hide the reducer's fixed costs.
  if (ctx.num_ranks() == 1) return ReducePath::fused;
  if (ctx.ranks_on_device() == 1) return ReducePath::decomposed;
  const double flops = 2.0 * double(a.m) * double(a.n) * double(a.k);
  return (a.m / ctx.num_ranks() >= 64 && flops >= 1e10) ? ReducePath::fused : ReducePath::decomposed;
}

// Ranks sharing a GPU (in-process worlds): full-mesh pull measured 2.0-3.0x over the decomposed
// path and 1.5-2.6x over the ring on the H200 with 8 ranks (docs/PERF.md): one pass over the
// partials in HBM instead of W-1 hops of running sums. One GPU per rank: the ring (push), the
// bandwidth-optimal schedule on point-to-point links (not measured here: issue 5).
RsSchedule gemm_rs_choose_algo(const Context& ctx) {
  return ctx.ranks_on_device() > 1 ? RsSchedule{RsAlgo::full_mesh, CommMode::pull}
                                   : RsSchedule{RsAlgo::ring, CommMode::push};
}

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
