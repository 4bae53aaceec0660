// tilelink/attention/fmha_launch.cuh — builds the kernel's parameters (TMA descriptors included)
// from an FmhaProblem and launches it. Included by the translation units that instantiate the
// kernel; TILELINK_FMHA_INSTANTIATE(dtype, head_dim, hook) instantiates both masks.
#pragma once

#include <algorithm>

#include "tilelink/attention/fmha_kernel.cuh"
#include "tilelink/attention/fmha_problem.hpp"
#include "tilelink/core/kernel_smem.hpp"
#include "tilelink/gemm/gemm.hpp"

namespace tilelink::attention {
namespace detail {

template <DType Dt>
using ElementOf = std::conditional_t<Dt == DType::bf16, cutlass::bfloat16_t, cutlass::half_t>;

// The kernels need more than 48 KiB of shared memory (core/kernel_smem.hpp): raised for both masks
// of an instantiation when a Context is created, and at a launch on a device not yet prepared.
template <DType Dt, int D, class KvWait>
void allow_fmha_smem(int device) {
  using Tr = FmhaTraits<ElementOf<Dt>, D>;
  tilelink::detail::allow_dynamic_smem<fmha_forward_kernel<ElementOf<Dt>, D, false, KvWait>>(device, Tr::kSmemBytes);
  tilelink::detail::allow_dynamic_smem<fmha_forward_kernel<ElementOf<Dt>, D, true, KvWait>>(device, Tr::kSmemBytes);
}
template <DType Dt, int D, class KvWait>
const bool fmha_setup_registered = gemm::detail::register_kernel_setup(&allow_fmha_smem<Dt, D, KvWait>);

}  // namespace detail

template <DType Dt, int D, bool Causal, class KvWait>
void launch_fmha_kernel(const FmhaProblem& pr, const KvWait& wait, cudaStream_t stream) {
  using T = detail::ElementOf<Dt>;
  using Tr = detail::FmhaTraits<T, D>;
  if (query_tiles(pr) == 0) return;
  detail::FmhaParams<T, D> p;
  p.tma_q = Tr::make_tma_q(static_cast<const T*>(pr.q), pr.q_rows, pr.q_heads, pr.batch, pr.q_stride);
  if (pr.kv_rows > 0) {
    p.tma_k = Tr::make_tma_k(static_cast<const T*>(pr.k), pr.kv_rows, pr.kv_heads, pr.batch, pr.k_stride);
    p.tma_v = Tr::make_tma_v(static_cast<const T*>(pr.v), pr.kv_rows, pr.kv_heads, pr.batch, pr.v_stride);
  } else {
    // No keys (no key segment can name a row): descriptors over Q's memory that are never used.
    p.tma_k = Tr::make_tma_k(static_cast<const T*>(pr.q), 1, 1, 1, pr.q_stride);
    p.tma_v = Tr::make_tma_v(static_cast<const T*>(pr.q), 1, 1, 1, pr.q_stride);
  }
  p.q_rows = pr.q_rows;
  p.kv_rows = pr.kv_rows;
  p.q_heads = int(pr.q_heads);
  p.kv_heads = int(pr.kv_heads);
  p.group = int(pr.q_heads / pr.kv_heads);
  p.o = static_cast<T*>(pr.o);
  for (int i = 0; i < 3; ++i) p.o_stride[i] = pr.o_stride[i];
  p.lse = pr.lse;
  p.scale_log2 = pr.scale * 1.4426950408889634f;
  p.q_segments = pr.q_segments;
  p.kv_segments = pr.kv_segments;
  p.m_block_begin[0] = 0;
  for (int s = 0; s < pr.q_segments; ++s) {
    p.q_segment[s] = pr.q_segment[s];
    p.m_block_begin[s + 1] = p.m_block_begin[s] + int((pr.q_segment[s].rows + kBlockM - 1) / kBlockM);
  }
  for (int s = 0; s < pr.kv_segments; ++s) p.kv_segment[s] = pr.kv_segment[s];
  const int64_t work = int64_t(p.m_block_begin[pr.q_segments]) * pr.q_heads * pr.batch;
  TL_REQUIRE(work < (int64_t(1) << 31), "attention: ", work, " query tiles x heads x batch are too many");
  const int64_t units = work * pr.kv_splits;
  TL_REQUIRE(units < (int64_t(1) << 31), "attention: ", units, " work units are too many");
  p.batch = int(pr.batch);
  p.total_work = int(work);
  p.kv_splits = pr.kv_splits;
  p.partial_o = pr.partial_o;
  p.partial_lse = pr.partial_lse;
  int device = 0;
  TL_CUDA_CHECK(cudaGetDevice(&device));
  const int64_t ctas = std::min<int64_t>(units, pr.max_ctas > 0 ? pr.max_ctas : gemm::detail::device_sm_count(device));
  constexpr auto kernel = detail::fmha_forward_kernel<T, D, Causal, KvWait>;
  tilelink::detail::allow_dynamic_smem<kernel>(device, Tr::kSmemBytes);
  kernel<<<unsigned(ctas), Tr::kThreads, Tr::kSmemBytes, stream>>>(p, wait);
  TL_CUDA_CHECK(cudaGetLastError());
  if (pr.kv_splits > 1) {
    constexpr int kRowsPerBlock = 8;  // one warp per query row
    const int64_t rows = pr.batch * pr.q_heads * pr.q_rows;
    detail::fmha_combine_kernel<T, D><<<unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock), 32 * kRowsPerBlock, 0,
                                        stream>>>(p);
    TL_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace tilelink::attention

#define TILELINK_FMHA_INSTANTIATE(DTYPE, HEAD_DIM, HOOK)                                                           \
  template const bool tilelink::attention::detail::fmha_setup_registered<DTYPE, HEAD_DIM, HOOK>;                   \
  template void tilelink::attention::launch_fmha_kernel<DTYPE, HEAD_DIM, false, HOOK>(                            \
      const tilelink::attention::FmhaProblem&, const HOOK&, cudaStream_t);                                         \
  template void tilelink::attention::launch_fmha_kernel<DTYPE, HEAD_DIM, true, HOOK>(                             \
      const tilelink::attention::FmhaProblem&, const HOOK&, cudaStream_t);
