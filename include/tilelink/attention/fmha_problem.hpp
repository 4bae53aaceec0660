// tilelink/attention/fmha_problem.hpp — the attention kernel's problem as the host hands it over:
// tensors, strides, and the query and key rows as segments of positions (see fmha_kernel.cuh).
// Ops that run the kernel with a hook of their own (the sequence-parallel op) build one of these
// and instantiate the launch with their hook type (TILELINK_FMHA_INSTANTIATE in fmha_launch.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tilelink/core/dtype.hpp"
#include "tilelink/core/error.hpp"

namespace tilelink::attention {

constexpr int kMaxQuerySegments = 2;
constexpr int kMaxKvSegments = 32;
constexpr int kBlockM = 128;  // query rows per CTA
constexpr int kBlockN = 128;  // key rows per tile

// A run of rows [row, row + rows) of a tensor whose positions are position, position + 1, ...
struct Segment {
  int64_t row = 0, rows = 0, position = 0;
};

// The hook of a plain call: the data is all there.
struct NoKvWait {
  __device__ void before_kv_tile(int /*segment*/, int /*batch*/, int64_t /*row*/, int64_t /*rows*/) const {}
};

struct FmhaProblem {
  DType dtype = DType::bf16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // [batch, q_heads, q_rows]; may be null
  int64_t batch = 0, q_rows = 0, kv_rows = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {}, o_stride[3] = {};  // {batch, row, head}
  bool causal = false;
  float scale = 0.0f;  // resolved (> 0)
  int q_segments = 0, kv_segments = 0;
  Segment q_segment[kMaxQuerySegments];
  Segment kv_segment[kMaxKvSegments];
  int max_ctas = 0;  // the kernel is persistent: at most this many CTAs (0: one per SM)
  // Split over the keys (kv_splits_for): kv_splits > 1 needs fp32 workspaces partial_o
  // [kv_splits][batch][q_heads][q_rows][head_dim] and partial_lse [kv_splits][batch][q_heads][q_rows].
  int kv_splits = 1;
  float* partial_o = nullptr;
  float* partial_lse = nullptr;
};

constexpr int kMaxKvSplits = 32;
// A split's keys must dwarf its own costs: the Q load, a 64 KiB fp32 epilogue per unit, and the
// merge reading it back (with 4 tiles, 72 items x 3 splits of a 33 us call ran 40% slower).
constexpr int kMinKvTilesPerSplit = 8;
constexpr int kMaxUnitsPerSm = 4;       // bounds the fp32 workspace (64 KiB per unit at d = 128)

// How many ranges to split each work item's keys into, for `work` items (query tiles x heads x
// batch) of which the longest needs `kv_tiles` key tiles, on `sms` SMs. With equal items the time is
// the number of waves of units, ceil(work * s / sms), times a unit's length, 1/s: fewer items
// than SMs leave SMs idle, and a last wave that is nearly empty idles most of them. The rule takes
// the fewest splits within 5% of the least cost over the splits allowed (at most kMaxKvSplits,
// kMinKvTilesPerSplit tiles per split, kMaxUnitsPerSm units per SM). Causal items differ in length
// and are ordered longest first, which already fills the last wave: they are split only when
// there are fewer of them than SMs.
int kv_splits_for(int64_t work, int64_t kv_tiles, int sms, bool causal);

// Bytes of the partial_o and partial_lse workspaces a problem with kv_splits > 1 needs.
int64_t partial_o_bytes(const FmhaProblem& p);
int64_t partial_lse_bytes(const FmhaProblem& p);

// Throws tilelink::Error naming `op` if the problem is not one the kernel runs (shape, dtype,
// alignment, strides, segments inside their tensors).
void check_problem(const FmhaProblem& p, const char* op);

// 128-row query tiles the problem launches (one CTA each, per head and sequence).
int64_t query_tiles(const FmhaProblem& p);

// Defined in fmha_launch.cuh; instantiated per (dtype, head_dim, hook).
template <DType Dt, int D, bool Causal, class KvWait>
void launch_fmha_kernel(const FmhaProblem& p, const KvWait& wait, cudaStream_t stream);

// Launches the instantiation the problem needs (checked by check_problem beforehand).
template <class KvWait>
void launch_fmha(const FmhaProblem& p, const KvWait& wait, cudaStream_t stream) {
  const bool bf16 = p.dtype == DType::bf16;
  if (p.head_dim == 64) {
    if (bf16) p.causal ? launch_fmha_kernel<DType::bf16, 64, true>(p, wait, stream)
                       : launch_fmha_kernel<DType::bf16, 64, false>(p, wait, stream);
    else p.causal ? launch_fmha_kernel<DType::fp16, 64, true>(p, wait, stream)
                  : launch_fmha_kernel<DType::fp16, 64, false>(p, wait, stream);
  } else {
    if (bf16) p.causal ? launch_fmha_kernel<DType::bf16, 128, true>(p, wait, stream)
                       : launch_fmha_kernel<DType::bf16, 128, false>(p, wait, stream);
    else p.causal ? launch_fmha_kernel<DType::fp16, 128, true>(p, wait, stream)
                  : launch_fmha_kernel<DType::fp16, 128, false>(p, wait, stream);
  }
}

}  // namespace tilelink::attention
