// src/ops/gemm_rs/gemm_rs.cu — GEMM-ReduceScatter: pick the path, then fused_reduce.cu does it.
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"

#include "ops/common/fused_reduce.hpp"

namespace tilelink {
namespace {
constexpr const char* kOp = "gemm_rs";

ops::ReduceRequest request(const GemmRsArgs& a, const GemmRsOptions& o) {
  return {kOp, a.dtype, a.a, a.b, a.c, a.m, a.n, a.k,
          o.algo == RsAlgo::ring ? ops::ReduceAlgo::ring : ops::ReduceAlgo::full_mesh, o.mode, o.comm_sms};
}
}  // namespace

ReducePath gemm_rs_choose_path(const Context& ctx, const GemmRsArgs& a) {
  // Rule (docs/OPS.md): fusing pays once the per-rank GEMM runs long enough to hide the
  // reduction kernel's fixed costs (launch, first handshake, last block's tail). Below ~64
  // rows per rank, or ~10 GFLOP per rank, the GEMM is too short and the decomposed path wins.
  if (ctx.num_ranks() == 1) return ReducePath::fused;
  const double flops = 2.0 * double(a.m) * double(a.n) * double(a.k);
  return (a.m / ctx.num_ranks() >= 64 && flops >= 1e10) ? ReducePath::fused : ReducePath::decomposed;
}

void gemm_rs(Context& ctx, const GemmRsArgs& a, const GemmRsOptions& o) {
  const ops::ReduceRequest r = request(a, o);
  ops::validate_reduce(ctx, r);
  auto& st = ctx.op_state<ops::ReduceState>(kOp);
  const ReducePath path = o.path == ReducePath::automatic ? gemm_rs_choose_path(ctx, a) : o.path;
  st.uniform.require(ctx, kOp,
                     {{"m", a.m}, {"n", a.n}, {"dtype", int64_t(a.dtype)}, {"path", int64_t(path)},
                      {"algo", int64_t(o.algo)}, {"mode", int64_t(o.mode)}, {"comm_sms", o.comm_sms}});
  if (path == ReducePath::fused) ops::fused_reduce(ctx, st, r);
  else ops::decomposed_reduce(ctx, st, r);
}

}  // namespace tilelink
