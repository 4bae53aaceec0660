// src/ops/gemm_ar/gemm_ar.cu — GEMM-AllReduce: pick path and algorithm, then fused_reduce.cu.
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"

#include "ops/common/fused_reduce.hpp"

namespace tilelink {
namespace {
constexpr const char* kOp = "gemm_ar";
}  // namespace

// Rules measured on the H200 (docs/PERF.md, "gemm_ar"), N 8192, K 3584 per rank:
//  * 8 ranks sharing a GPU: fused two_shot won from M = 128 (16 rows per rank: 1.16x over the GEMM
//    followed by the one-shot reduction; 1.26x at 256, 1.60-1.65x from 512); one_shot was ~1.0x.
//    So: two_shot once every rank's block has >= 16 rows; one_shot below and for rows that do
//    not split evenly across the ranks.
//  * one GPU per rank (2 H200s over NVLink): GEMM + NCCL all-reduce won from M = 256 (fused
//    one/two-shot 0.76-0.99x of it); at M = 128 fused one_shot won (1.17x): every rank pulls its
//    peers' partials, one hop, where NCCL pays its launch and protocol latency. So: fused
//    one_shot while the bytes each rank pulls, M*N*2*(W-1), stay within 2 MiB.
namespace {
constexpr double kOneShotPullBytes = 2.0 * 1024 * 1024;
bool one_gpu_per_rank_one_shot(const Context& ctx, const GemmArArgs& a) {
  const double bytes = double(a.m) * double(a.n) * double(dtype_size(a.dtype)) * (ctx.num_ranks() - 1);
  return bytes <= kOneShotPullBytes;
}
}  // namespace

ArAlgo gemm_ar_choose_algo(const Context& ctx, const GemmArArgs& a) {
  const int64_t w = ctx.num_ranks();
  if (ctx.ranks_on_device() == 1 && w > 1) return ArAlgo::one_shot;  // fused or decomposed: see path
  return a.m % w == 0 && a.m >= 16 * w ? ArAlgo::two_shot : ArAlgo::one_shot;
}

ReducePath gemm_ar_choose_path(const Context& ctx, const GemmArArgs& a) {
  if (ctx.num_ranks() == 1) return ReducePath::fused;
  if (ctx.ranks_on_device() == 1)
    return one_gpu_per_rank_one_shot(ctx, a) ? ReducePath::fused : ReducePath::decomposed;
  return a.m >= 16 * int64_t(ctx.num_ranks()) ? ReducePath::fused : ReducePath::decomposed;
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
