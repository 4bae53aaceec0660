// src/ops/gemm_ar/gemm_ar.cu — GEMM-AllReduce: pick path and algorithm, then fused_reduce.cu.
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"

#include "ops/common/op_call.hpp"
#include "ops/common/fused_reduce.hpp"

namespace tilelink {
namespace {
constexpr const char* kOp = "gemm_ar";
}  // namespace

static void gemm_ar_enqueue(Context& ctx, const GemmArArgs& a, const GemmArOptions& o, cudaStream_t stream) {
  const ArAlgo algo = o.algo == ArAlgo::automatic ? gemm_ar_choose_algo(ctx, a) : o.algo;
  ops::ReduceRequest r{kOp, a.dtype, a.a, a.b, a.c, a.m, a.n, a.k,
                       algo == ArAlgo::one_shot ? ops::ReduceAlgo::one_shot : ops::ReduceAlgo::two_shot,
                       CommMode::pull, o.comm_sms};
  r.stream = stream;
  ops::validate_reduce(ctx, r);
  auto& st = ctx.op_state<ops::ReduceState>(kOp);
  const ReducePath path = o.path == ReducePath::automatic ? gemm_ar_choose_path(ctx, a) : o.path;
  r.k_plan = st.uniform.require(ctx, kOp,
                                {{"m", a.m}, {"n", a.n}, {"dtype", int64_t(a.dtype)}, {"path", int64_t(path)},
                                 {"algo", int64_t(algo)}, {"comm_sms", o.comm_sms}},
                                {{"k", a.k}})[0];
  if (path == ReducePath::fused) ops::fused_reduce(ctx, st, r);
  else ops::decomposed_reduce(ctx, st, r);
}

void gemm_ar(Context& ctx, const GemmArArgs& a, const GemmArOptions& o) {
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { gemm_ar_enqueue(ctx, a, o, stream); });
}

}  // namespace tilelink
