// tests/gpu/ops/sp_attention_cases.cuh — one rank's sp_attention call checked against attention
// over the whole sequence in fp32, shared by the in-process test and the MPI test. Every rank
// rebuilds the full K and V in position order from the pure-function inputs of every rank (so it
// needs nothing from its peers but the seed) and computes its own queries' reference on the GPU.
#pragma once

#include <cmath>
#include <string>

#include "gpu/attention/reference.cuh"
#include "gpu/common/gpu_test.hpp"
#include "tilelink/ops/sp_attention/sp_attention.hpp"
#include "tilelink/testing/check.hpp"

namespace tilelink::test::sp {

using tilelink::CommEngine;
using tilelink::Context;
using tilelink::DType;
using tilelink::OpPath;
using tilelink::SequenceSharding;
namespace tt = tilelink::test;

struct SpCase {
  DType dtype;
  int64_t batch, len, q_heads, kv_heads, head_dim;
  bool causal;
  SequenceSharding sharding;
  OpPath path;
  CommEngine engine;
};

inline std::string describe(const SpCase& c) {
  return std::string(tilelink::dtype_name(c.dtype)) + " b" + std::to_string(c.batch) + " len" +
         std::to_string(c.len) + " h" + std::to_string(c.q_heads) + "/" + std::to_string(c.kv_heads) + " d" +
         std::to_string(c.head_dim) + (c.causal ? " causal" : " full") +
         (c.sharding == SequenceSharding::zigzag ? " zigzag " : " contiguous ") + tilelink::op_path_name(c.path) +
         " " + tilelink::comm_engine_name(c.engine);
}

struct RankResult {
  tt::Comparison out;
  int64_t lse_bad = 0;
};

// Rank `rank`'s shard of K or V ([batch, len, kv_heads, d]): a pure function of the seeds.
inline void fill_shard(const SpCase& c, void* dev, uint64_t seed, int rank, int which, cudaStream_t s) {
  tt::fill_uniform(c.dtype, dev, c.batch * c.len * c.kv_heads * c.head_dim, tt::mix_seed(seed, rank, which), 2.0f, s);
}

inline RankResult run_rank(Context& ctx, const SpCase& c, uint64_t seed) {
  const int w = ctx.num_ranks(), r = ctx.rank();
  const cudaStream_t s = ctx.stream();
  const int64_t b = c.batch, len = c.len, hq = c.q_heads, hkv = c.kv_heads, d = c.head_dim, total = w * len;
  const int64_t nq = b * len * hq * d, nkv = b * len * hkv * d;
  void *q, *k, *v, *out, *lse, *k_full, *v_full, *shard, *ref, *ref_lse;
  for (auto [p, bytes] : {std::pair{&q, nq * 2}, {&k, nkv * 2}, {&v, nkv * 2}, {&out, nq * 2}, {&lse, b * hq * len * 4},
                          {&k_full, w * nkv * 2}, {&v_full, w * nkv * 2}, {&shard, nkv * 2}, {&ref, nq * 4},
                          {&ref_lse, b * hq * len * 4}})
    TL_CUDA_CHECK(cudaMalloc(p, size_t(bytes)));
  tt::fill_uniform(c.dtype, q, nq, tt::mix_seed(seed, r, 0), 2.0f, s);
  fill_shard(c, k, seed, r, 1, s);
  fill_shard(c, v, seed, r, 2, s);
  tt::poison_nan(c.dtype, out, nq, s);
  tt::poison_device(lse, size_t(b * hq * len * 4), 0xff, s);

  tilelink::SpAttentionArgs a;
  a.dtype = c.dtype, a.q = q, a.k = k, a.v = v, a.out = out, a.lse = static_cast<float*>(lse);
  a.batch = b, a.local_len = len, a.q_heads = hq, a.kv_heads = hkv, a.head_dim = d;
  a.causal = c.causal, a.sharding = c.sharding;
  tilelink::SpAttentionOptions o;
  o.path = c.path, o.engine = c.engine;
  tilelink::sp_attention(ctx, a, o);
  ctx.synchronize("sp_attention");

  // The whole sequence's K and V in position order: chunk by chunk from each rank's shard.
  const bool zigzag = c.sharding == SequenceSharding::zigzag;
  const int64_t chunk = zigzag ? len / 2 : len, row = hkv * d * 2;
  for (int which = 1; which <= 2; ++which) {
    char* full = static_cast<char*>(which == 1 ? k_full : v_full);
    for (int src = 0; src < w; ++src) {
      fill_shard(c, shard, seed, src, which, s);
      const int64_t position_chunks[2] = {src, 2 * w - 1 - src};
      for (int half = 0; half < (zigzag ? 2 : 1); ++half)
        for (int64_t bi = 0; bi < b; ++bi)
          TL_CUDA_CHECK(cudaMemcpyAsync(full + (bi * total + position_chunks[half] * chunk) * row,
                                        static_cast<char*>(shard) + (bi * len + half * chunk) * row, size_t(chunk * row),
                                        cudaMemcpyDeviceToDevice, s));
    }
  }
  tltest::ReferenceShape rs{b, len, total, hq, hkv, d, {len * hq * d, hq * d, d}, {total * hkv * d, hkv * d, d},
                            {total * hkv * d, hkv * d, d}, c.causal, r * chunk, 1.0f / std::sqrt(float(d))};
  if (zigzag) rs.q_split = chunk, rs.q_position_after = (2 * w - 1 - r) * chunk;
  const dim3 grid{unsigned(len), unsigned(hq), unsigned(b)};
  const size_t smem = size_t(total) * 4;
  if (c.dtype == DType::bf16)
    tltest::attention_reference_kernel<<<grid, 128, smem, s>>>(
        static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k_full),
        static_cast<const __nv_bfloat16*>(v_full), static_cast<float*>(ref), static_cast<float*>(ref_lse), rs);
  else
    tltest::attention_reference_kernel<<<grid, 128, smem, s>>>(
        static_cast<const __half*>(q), static_cast<const __half*>(k_full), static_cast<const __half*>(v_full),
        static_cast<float*>(ref), static_cast<float*>(ref_lse), rs);
  tt::check_launch("attention reference");

  RankResult res;
  const double tol = c.dtype == DType::bf16 ? 1.6e-2 : 2.5e-3;
  res.out = tt::compare(c.dtype, out, d, static_cast<const float*>(ref), b * len * hq, d, tol, tol, s);
  const auto got = tt::download_n(static_cast<const float*>(lse), size_t(b * hq * len), s);
  const auto want = tt::download_n(static_cast<const float*>(ref_lse), size_t(b * hq * len), s);
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 1e-3 * std::max(1.0f, std::abs(want[i])))) ++res.lse_bad;
  for (void* p : {q, k, v, out, lse, k_full, v_full, shard, ref, ref_lse}) TL_CUDA_CHECK(cudaFree(p));
  return res;
}

}  // namespace tilelink::test::sp
