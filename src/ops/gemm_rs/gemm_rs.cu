// src/ops/gemm_rs/gemm_rs.cu — GEMM-ReduceScatter: pick the path, then fused_reduce.cu does it.
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"

#include "ops/common/op_call.hpp"
#include "ops/common/fused_reduce.hpp"
#include "ops/common/rank_split.hpp"
#include "ops/gemm_rs/per_rank_gemms.hpp"

namespace tilelink {
namespace {
constexpr const char* kOp = "gemm_rs";

ops::ReduceRequest request(const GemmRsArgs& a, const GemmRsOptions& o, RsSchedule sched) {
  return {kOp, a.dtype, a.a, a.b, a.c, a.m, a.n, a.k,
          sched.algo == RsAlgo::ring ? ops::ReduceAlgo::ring : ops::ReduceAlgo::full_mesh, sched.mode, o.comm_sms};
}
}  // namespace

static void gemm_rs_enqueue(Context& ctx, const GemmRsArgs& a, const GemmRsOptions& o, cudaStream_t stream) {
  const RsSchedule sched = o.algo == RsAlgo::automatic ? gemm_rs_choose_algo(ctx) : RsSchedule{o.algo, o.mode};
  ops::ReduceRequest r = request(a, o, sched);
  r.stream = stream;
  ops::validate_reduce(ctx, r);
  auto& st = ctx.op_state<ops::ReduceState>(kOp);
  const ReducePath path = o.path == ReducePath::automatic ? gemm_rs_choose_path(ctx, a) : o.path;
  r.k_plan = st.uniform.require(ctx, kOp,
                                {{"m", a.m}, {"n", a.n}, {"dtype", int64_t(a.dtype)}, {"path", int64_t(path)},
                                 {"algo", int64_t(sched.algo)}, {"mode", int64_t(sched.mode)},
                                 {"comm_sms", o.comm_sms}, {"split", int64_t(o.split)}},
                                {{"k", a.k}})[0];
  if (path == ReducePath::fused) ops::fused_reduce(ctx, st, r);
  // Never in a graph capture (split_by_rank): copies between GPUs stalled first replays of ag_gemm
  // graphs.
  else if (ops::split_by_rank(ctx, o.split, ops::gemm_rs_split_decomposed(topology_of(ctx), a), kOp))
    ops::per_rank_gemms_reduce_scatter(ctx, st, r);
  else ops::decomposed_reduce(ctx, st, r);
}

void gemm_rs(Context& ctx, const GemmRsArgs& a, const GemmRsOptions& o) {
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { gemm_rs_enqueue(ctx, a, o, stream); });
}

}  // namespace tilelink
