// src/ops/gemm_ar/gemm_ar.cu — GEMM-AllReduce: pick path and algorithm, then fused_reduce.cu.
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"

#include "ops/common/fused_reduce.hpp"

namespace tilelink {
namespace {
constexpr const char* kOp = "gemm_ar";
}  // namespace

// Rules measured on the H200 with 8 in-process ranks (docs/PERF.md, "gemm_ar"), N 8192,
// K 3584 per rank: at M = 128 the decomposed path won (one_shot 0.87x, two_shot 0.38x); from
// M = 256 up two_shot won (1.25x at 256, 1.42-1.67x from 512), one_shot was ~1.0x. So: fused
// two_shot once every rank's block has >= 32 rows, decomposed below. Below that, and for rows
// that do not split evenly across the ranks, one_shot (also the reduction the decomposed path
// runs when ranks share a GPU: two_shot there measured 0.59x of it at M = 128).
ArAlgo gemm_ar_choose_algo(const Context& ctx, const GemmArArgs& a) {
  const int64_t w = ctx.num_ranks();
  return a.m % w == 0 && a.m >= 32 * w ? ArAlgo::two_shot : ArAlgo::one_shot;
}

ReducePath gemm_ar_choose_path(const Context& ctx, const GemmArArgs& a) {
  if (ctx.num_ranks() == 1) return ReducePath::fused;
  // One GPU per rank (2 H200s over NVLink): GEMM + NCCL all-reduce won at every M (the fused
  // one/two-shot reached 0.49-0.95x of it), so the decomposed path is chosen there.
  if (ctx.ranks_on_device() == 1) return ReducePath::decomposed;
  return a.m >= 32 * int64_t(ctx.num_ranks()) ? ReducePath::fused : ReducePath::decomposed;
}

void gemm_ar(Context& ctx, const GemmArArgs& a, const GemmArOptions& o) {
  const ArAlgo algo = o.algo == ArAlgo::automatic ? gemm_ar_choose_algo(ctx, a) : o.algo;
  ops::ReduceRequest r{kOp, a.dtype, a.a, a.b, a.c, a.m, a.n, a.k,
                       algo == ArAlgo::one_shot ? ops::ReduceAlgo::one_shot : ops::ReduceAlgo::two_shot,
                       CommMode::pull, o.comm_sms};
  ops::validate_reduce(ctx, r);
  auto& st = ctx.op_state<ops::ReduceState>(kOp);
  const ReducePath path = o.path == ReducePath::automatic ? gemm_ar_choose_path(ctx, a) : o.path;
  st.uniform.require(ctx, kOp,
                     {{"m", a.m}, {"n", a.n}, {"dtype", int64_t(a.dtype)}, {"path", int64_t(path)},
                      {"algo", int64_t(algo)}, {"comm_sms", o.comm_sms}});
  if (path == ReducePath::fused) ops::fused_reduce(ctx, st, r);
  else ops::decomposed_reduce(ctx, st, r);
}

}  // namespace tilelink
