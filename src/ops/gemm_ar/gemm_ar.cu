// src/ops/gemm_ar/gemm_ar.cu — GEMM-AllReduce: pick path and algorithm, then fused_reduce.cu.
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"

#include "ops/common/fused_reduce.hpp"

namespace tilelink {
namespace {
constexpr const char* kOp = "gemm_ar";
}  // namespace

ArAlgo gemm_ar_choose_algo(const Context& ctx, const GemmArArgs& a) {
  // One-shot reads (W-1) full partials per rank in one hop; two-shot moves 2(W-1)/W of that in
  // two hops. Latency wins below ~1 MiB of output, bandwidth above (docs/OPS.md).
  const double bytes = double(a.m) * double(a.n) * double(dtype_size(a.dtype));
  return (bytes <= double(1 << 20) || a.m % ctx.num_ranks() != 0) ? ArAlgo::one_shot : ArAlgo::two_shot;
}

ReducePath gemm_ar_choose_path(const Context& ctx, const GemmArArgs& a) {
  if (ctx.num_ranks() == 1) return ReducePath::fused;
  const double flops = 2.0 * double(a.m) * double(a.n) * double(a.k);
  return flops >= 2e9 ? ReducePath::fused : ReducePath::decomposed;
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
