// tilelink/attention/fmha_kernel.cuh — the attention forward kernel on Hopper. Persistent: each
// CTA strides over the work items (a 128-query tile of one head of one sequence).
//
//   O = softmax(scale · Q · Kᵀ + mask) · V,   LSE = log Σ exp(scale · Q · Kᵀ + mask)   (natural log)
//
// Warp-specialised: warp group 0 is the producer — one thread issues the TMA loads of the Q tile
// (once per work item, when the consumers are done with the last one) and of every K and V tile
// into a ring of shared-memory stages (CUTLASS's TMA pipeline: full/empty barriers per stage);
// warp groups 1 and 2 are the consumers, 64 query rows each:
//   S = Q · Kᵀ            wgmma, both operands in shared memory (K-major)
//   online softmax        on the accumulator registers, a row's max and sum finished in its lane quad
//   O += P · V            wgmma with P from registers (the S accumulator rounded to the input type
//                         is already the A-operand register layout) and V read N-major from shared
//                         memory (V's rows are D-contiguous, which for B = Vᵀ is the MN-major form)
// The two consumer warp groups run independently, so one's softmax hides behind the other's MMAs.
//
// Positions: the kernel sees the query rows and the key rows as lists of segments, each a run of
// rows with consecutive positions starting at `position`. The causal mask compares positions, not
// row indices, so a caller can hand it shards of a longer sequence in any order (the sequence-
// parallel op lists the local keys first and the gathered ones in order of arrival). A key tile
// never straddles two segments; a tile past a segment's end is masked there.
//
// The KvWait policy is the hook where a key/value tile waits for its data: the producer thread
// calls `wait.before_kv_tile(segment, batch, row_begin, rows)` before issuing the tile's TMA loads
// (a plain call uses NoKvWait). A policy that waits on a flag another agent set must order the flag's
// acquire before the TMA (async proxy) reads: fence.proxy.async after the wait.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cute/atom/mma_atom.hpp"
#include "cute/atom/copy_traits_sm90_tma.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cutlass.h"
#include "cutlass/pipeline/sm90_pipeline.hpp"
#include "tilelink/attention/fmha_problem.hpp"

namespace tilelink::attention {

namespace detail {

using namespace cute;

// T: cutlass::bfloat16_t or cutlass::half_t.
template <class T, int D>
struct FmhaTraits {
  static constexpr int kHeadDim = D;
  static constexpr int kBlockM = attention::kBlockM;  // query rows per CTA: 64 per consumer warp group
  static constexpr int kBlockN = attention::kBlockN;  // key rows per tile
  static constexpr int kStages = D <= 64 ? 4 : 2;
  static constexpr int kThreads = 384;  // producer warp group + 2 consumer warp groups

  using BlockM = Int<kBlockM>;
  using BlockN = Int<kBlockN>;
  using HeadDim = Int<D>;
  using MmaQK = decltype(make_tiled_mma(GMMA::ss_op_selector<T, T, float, Shape<_64, BlockN, HeadDim>>(),
                                        Layout<Shape<_2, _1, _1>>{}));
  using MmaPV = decltype(make_tiled_mma(GMMA::rs_op_selector<T, T, float, Shape<_64, HeadDim, BlockN>,
                                                             GMMA::Major::K, GMMA::Major::MN>(),
                                        Layout<Shape<_2, _1, _1>>{}));
  using SmemQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, Shape<BlockM, HeadDim>{}));
  using SmemK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<T>{}, Shape<BlockN, HeadDim, Int<kStages>>{}));
  // V as the B operand of P · V: (D, key rows), D contiguous.
  using SmemVt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<T>{}, Shape<HeadDim, BlockN, Int<kStages>>{}));
  using Pipeline = cutlass::PipelineTmaAsync<kStages>;

  struct SharedStorage {
    cute::array_aligned<T, cosize_v<SmemQ>, 1024> q;
    cute::array_aligned<T, cosize_v<SmemK>, 1024> k;
    cute::array_aligned<T, cosize_v<SmemVt>, 1024> v;
    typename Pipeline::SharedStorage pipe_k, pipe_v;
    alignas(8) uint64_t q_full;   // Q tile landed (TMA transaction count)
    alignas(8) uint64_t q_empty;  // consumers are done reading the Q tile (256 arrivals)
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage)) + 1024;  // + alignment slack

  // Global tensors as TMA sees them: (rows, D, heads, batch) for Q and K, (D, rows, heads, batch)
  // for V; strides in elements, D contiguous.
  using GStride = Stride<int64_t, _1, int64_t, int64_t>;
  using GStrideT = Stride<_1, int64_t, int64_t, int64_t>;
  static auto rows_view(const T* p, int64_t rows, int64_t heads, int64_t batch, const int64_t (&stride)[3]) {
    return make_tensor(make_gmem_ptr(p), make_layout(make_shape(rows, int64_t(D), heads, batch),
                                                     GStride{stride[1], _1{}, stride[2], stride[0]}));
  }
  static auto cols_view(const T* p, int64_t rows, int64_t heads, int64_t batch, const int64_t (&stride)[3]) {
    return make_tensor(make_gmem_ptr(p), make_layout(make_shape(int64_t(D), rows, heads, batch),
                                                     GStrideT{_1{}, stride[1], stride[2], stride[0]}));
  }
  // stride = {batch, row, head}.
  static auto make_tma_q(const T* p, int64_t rows, int64_t heads, int64_t batch, const int64_t (&stride)[3]) {
    return make_tma_copy(SM90_TMA_LOAD{}, rows_view(p, rows, heads, batch, stride), SmemQ{});
  }
  static auto make_tma_k(const T* p, int64_t rows, int64_t heads, int64_t batch, const int64_t (&stride)[3]) {
    return make_tma_copy(SM90_TMA_LOAD{}, rows_view(p, rows, heads, batch, stride), SmemK{}(_, _, 0));
  }
  static auto make_tma_v(const T* p, int64_t rows, int64_t heads, int64_t batch, const int64_t (&stride)[3]) {
    return make_tma_copy(SM90_TMA_LOAD{}, cols_view(p, rows, heads, batch, stride), SmemVt{}(_, _, 0));
  }
  static constexpr int64_t kUnitStride[3] = {1, 1, 1};
  using TmaQ = decltype(make_tma_q(nullptr, 1, 1, 1, kUnitStride));
  using TmaK = decltype(make_tma_k(nullptr, 1, 1, 1, kUnitStride));
  using TmaV = decltype(make_tma_v(nullptr, 1, 1, 1, kUnitStride));
};

template <class T, int D>
struct FmhaParams {
  using Traits = FmhaTraits<T, D>;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaK tma_k;
  typename Traits::TmaV tma_v;
  int64_t q_rows = 0, kv_rows = 0;  // rows of the Q and K/V tensors (per sequence)
  int q_heads = 0, kv_heads = 0, group = 1;
  T* o = nullptr;                   // [batch, q_rows, q_heads, D] with o_stride = {batch, row, head}
  int64_t o_stride[3] = {0, 0, 0};
  float* lse = nullptr;             // [batch, q_heads, q_rows], natural log; may be null
  float scale_log2 = 0.0f;          // softmax scale x log2(e)
  int batch = 0;
  int total_work = 0;               // query tiles x heads x batch
  // Split over the keys: each work item's key tiles are cut into kv_splits ranges, each a unit of
  // its own that writes its normalised fp32 output and log-sum-exp (base 2) to partial_o /
  // partial_lse, [split][batch][q_heads][q_rows](x D); a combine kernel merges them. CTAs stride
  // over total_work x kv_splits units, the split fastest.
  int kv_splits = 1;
  float* partial_o = nullptr;
  float* partial_lse = nullptr;
  int q_segments = 0, kv_segments = 0;
  Segment q_segment[kMaxQuerySegments];
  int m_block_begin[kMaxQuerySegments + 1];  // prefix sums of each query segment's 128-row tiles
  Segment kv_segment[kMaxKvSegments];
};

// The accumulator fragment of a 64xN wgmma, ((2, 2, N/8), MMA_M, MMA_N), seen as (rows, cols):
// a thread's 2 rows (r, r + 8) x its 2 columns of each 8-column block.
template <class Layout>
__device__ auto acc_rows_cols(Layout l) {
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<0, 2>(l), get<2>(l)));
}

// The same fragment as the A operand (registers) of a 64xNxK wgmma with K = this fragment's N:
// each 16-column block is ((2 columns, 2 rows, 2 eight-column halves)).
template <class Layout>
__device__ auto acc_as_a_operand(Layout l) {
  auto blocks = logical_divide(get<0, 2>(l), _2{});  // (2, N/16)
  return make_layout(make_layout(get<0, 0>(l), get<0, 1>(l), get<0>(blocks)), get<1>(l),
                     make_layout(get<1>(blocks), get<2>(l)));
}

// Column c of a thread's accumulator row, relative to its first: pairs of adjacent columns, one
// pair in every 8-column block (the wgmma accumulator layout that acc_rows_cols exposes).
__device__ constexpr int acc_col_offset(int c) { return (c % 2) + 8 * (c / 2); }

// Two floats rounded to the element type, packed as the 32-bit register a wgmma operand takes.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, cutlass::bfloat16_t>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    static_assert(std::is_same_v<T, cutlass::half_t>, "bf16 or fp16");
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// 2^x on the special-function unit, denormals flushed. exp2f would add a range check and two
// multiplies around every exponential to keep denormal results, which a softmax weight below
// 2^-126 of the row's largest does not need; the softmax is the kernel's ALU-bound stretch.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Key tiles of segment s a query tile needs: all of them, or with a causal mask those whose first
// position is not past the query tile's last position. The producer and the consumers walk the
// segments in the caller's order, tile by tile.
template <class P>
__device__ int64_t kv_tiles_needed(const P& p, int s, int64_t last_q_position, bool causal, int block_n) {
  const Segment& seg = p.kv_segment[s];
  int64_t rows = seg.rows;
  if (causal) {
    const int64_t visible = last_q_position - seg.position + 1;  // rows of the segment at or before it
    rows = visible < 0 ? 0 : (visible < rows ? visible : rows);
  }
  return (rows + block_n - 1) / block_n;
}

template <class P>
__device__ int64_t kv_tiles_total(const P& p, int64_t last_q_position, bool causal, int block_n) {
  int64_t tiles = 0;
  for (int s = 0; s < p.kv_segments; ++s) tiles += kv_tiles_needed(p, s, last_q_position, causal, block_n);
  return tiles;
}

// Split `split` of `splits` takes the key tiles [begin, end) of the `tiles` a work item needs.
__device__ inline void split_range(int64_t tiles, int split, int splits, int64_t& begin, int64_t& end) {
  begin = tiles * split / splits;
  end = tiles * (split + 1) / splits;
}

// One CTA's unit of work: a 128-row query tile of one head of one sequence. Work items are
// numbered with the head fastest (CTAs running at once share their keys in L2) and, with a causal
// mask, the query tiles of the latest positions (the most keys) first.
struct WorkTile {
  Segment qseg;
  int64_t m_local;  // first row of the tile within its segment
  int64_t q_row0, q_rows;
  int64_t last_q_position;
  int head, batch;
};

template <bool kCausal, class P>
__device__ WorkTile work_tile(const P& p, int w) {
  WorkTile t;
  const int heads_batch = p.q_heads * p.batch;
  const int total_m_blocks = p.m_block_begin[p.q_segments];
  const int m_index = w / heads_batch;
  const int m_linear = kCausal ? total_m_blocks - 1 - m_index : m_index;
  t.head = (w % heads_batch) % p.q_heads;
  t.batch = (w % heads_batch) / p.q_heads;
  int qs = 0;
  while (qs + 1 < p.q_segments && m_linear >= p.m_block_begin[qs + 1]) ++qs;
  t.qseg = p.q_segment[qs];
  t.m_local = int64_t(m_linear - p.m_block_begin[qs]) * kBlockM;
  t.q_row0 = t.qseg.row + t.m_local;
  t.q_rows = t.qseg.rows - t.m_local < kBlockM ? t.qseg.rows - t.m_local : kBlockM;
  t.last_q_position = t.qseg.position + t.m_local + t.q_rows - 1;
  return t;
}

template <class T, int D, bool kCausal, class KvWait>
__global__ void __launch_bounds__(384, 1) fmha_forward_kernel(const __grid_constant__ FmhaParams<T, D> p,
                                                              const KvWait wait) {
  using Tr = FmhaTraits<T, D>;
  constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  using Pipeline = typename Tr::Pipeline;
  using PipelineState = typename cutlass::PipelineState<Tr::kStages>;

  extern __shared__ char smem_raw[];
  // The swizzled layouts need 1024-byte alignment in the shared window.
  const uintptr_t base = reinterpret_cast<uintptr_t>(smem_raw);
  auto& smem = *reinterpret_cast<typename Tr::SharedStorage*>((base + 1023) & ~uintptr_t(1023));

  const int warp_group = threadIdx.x / 128;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  typename Pipeline::Params pipe_params;
  pipe_params.transaction_bytes = kBlockN * D * sizeof(T);
  pipe_params.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
  pipe_params.is_leader = threadIdx.x == 0;
  pipe_params.num_consumers = 256;
  Pipeline pipe_k(smem.pipe_k, pipe_params, Shape<_1, _1, _1>{});
  Pipeline pipe_v(smem.pipe_v, pipe_params, Shape<_1, _1, _1>{});
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&smem.q_full, 1);
    cutlass::arch::ClusterBarrier::init(&smem.q_empty, 256);
  }
  cutlass::arch::fence_barrier_init();
  __syncthreads();

  Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), typename Tr::SmemQ{});
  Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), typename Tr::SmemK{});
  Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), typename Tr::SmemVt{});

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<24>();
    if (warp != 0 || !cute::elect_one_sync()) return;
    Tensor mQ = p.tma_q.get_tma_tensor(make_shape(p.q_rows, int64_t(D), int64_t(p.q_heads), int64_t(p.batch)));
    Tensor mK = p.tma_k.get_tma_tensor(make_shape(p.kv_rows, int64_t(D), int64_t(p.kv_heads), int64_t(p.batch)));
    Tensor mVt = p.tma_v.get_tma_tensor(make_shape(int64_t(D), p.kv_rows, int64_t(p.kv_heads), int64_t(p.batch)));
    auto q_cta = p.tma_q.get_slice(0);
    auto k_cta = p.tma_k.get_slice(0);
    auto v_cta = p.tma_v.get_slice(0);
    Tensor tQsQ = q_cta.partition_D(sQ);
    Tensor tKsK = k_cta.partition_D(sK);
    Tensor tVsV = v_cta.partition_D(sVt);
    PipelineState state = cutlass::make_producer_start_state<Pipeline>();
    int iteration = 0;
    for (int u = blockIdx.x; u < p.total_work * p.kv_splits; u += gridDim.x, ++iteration) {
      const WorkTile wt = work_tile<kCausal>(p, u / p.kv_splits);
      const int kv_head = wt.head / p.group;
      int64_t tile_begin, tile_end;  // of the item's key tiles, over all segments
      split_range(kv_tiles_total(p, wt.last_q_position, kCausal, kBlockN), u % p.kv_splits, p.kv_splits, tile_begin,
                  tile_end);
      // Q: rows q_row0 .. + 128 (TMA fills rows past the tensor with zeros; they are never
      // stored), once the consumers are done with the previous tile's.
      if (iteration > 0) cutlass::arch::ClusterBarrier::wait(&smem.q_empty, (iteration - 1) & 1);
      Tensor gQ = local_tile(domain_offset(make_coord(wt.q_row0, 0), mQ(_, _, wt.head, wt.batch)),
                             Shape<Int<kBlockM>, Int<D>>{}, make_coord(0, 0));
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&smem.q_full, kBlockM * D * sizeof(T));
      copy(p.tma_q.with(smem.q_full), q_cta.partition_S(gQ), tQsQ);

      int64_t seg_first = 0;  // index of the segment's first tile in the item's sequence of tiles
      for (int s = 0; s < p.kv_segments && seg_first < tile_end; ++s) {
        const int64_t tiles = kv_tiles_needed(p, s, wt.last_q_position, kCausal, kBlockN);
        const int64_t t_begin = tile_begin > seg_first ? tile_begin - seg_first : 0;
        const int64_t t_end = tile_end - seg_first < tiles ? tile_end - seg_first : tiles;
        seg_first += tiles;
        if (t_begin >= t_end) continue;
        const Segment seg = p.kv_segment[s];
        Tensor gK = local_tile(domain_offset(make_coord(seg.row, 0), mK(_, _, kv_head, wt.batch)),
                               Shape<Int<kBlockN>, Int<D>>{}, make_coord(_, 0));  // (N, D, tiles)
        Tensor gVt = local_tile(domain_offset(make_coord(0, seg.row), mVt(_, _, kv_head, wt.batch)),
                                Shape<Int<D>, Int<kBlockN>>{}, make_coord(0, _));  // (D, N, tiles)
        Tensor tKgK = k_cta.partition_S(gK);
        Tensor tVgV = v_cta.partition_S(gVt);
        for (int64_t t = t_begin; t < t_end; ++t) {
          const int64_t left = seg.rows - t * kBlockN;
          wait.before_kv_tile(s, wt.batch, seg.row + t * kBlockN, left < kBlockN ? left : kBlockN);
          pipe_k.producer_acquire(state);
          copy(p.tma_k.with(*pipe_k.producer_get_barrier(state)), tKgK(_, _, _, t), tKsK(_, _, _, state.index()));
          pipe_v.producer_acquire(state);
          copy(p.tma_v.with(*pipe_v.producer_get_barrier(state)), tVgV(_, _, _, t), tVsV(_, _, _, state.index()));
          ++state;
        }
      }
    }
    return;
  }

  // Consumers.
  cutlass::arch::warpgroup_reg_alloc<240>();
  const int tid = threadIdx.x - 128;
  typename Tr::MmaQK mma_qk;
  typename Tr::MmaPV mma_pv;
  auto thr_qk = mma_qk.get_thread_slice(tid);
  auto thr_pv = mma_pv.get_thread_slice(tid);

  Tensor tSrQ = thr_qk.make_fragment_A(thr_qk.partition_A(sQ));  // descriptors
  Tensor tSrK = thr_qk.make_fragment_B(thr_qk.partition_B(sK));
  Tensor tOrV = thr_pv.make_fragment_B(thr_pv.partition_B(sVt));
  Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
  Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<D>>{});
  Tensor cS = thr_qk.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kBlockN>>{}));
  Tensor S = make_tensor(tSrS.data(), acc_rows_cols(tSrS.layout()));
  Tensor S_coord = make_tensor(cS.data(), acc_rows_cols(cS.layout()));
  Tensor O = make_tensor(tOrO.data(), acc_rows_cols(tOrO.layout()));
  Tensor cO = thr_pv.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<D>>{}));
  Tensor O_coord = make_tensor(cO.data(), acc_rows_cols(cO.layout()));
  constexpr int kRows = size<0>(decltype(S.layout()){});  // 2: rows r and r + 8
  const int col_base = get<1>(S_coord(0, 0));  // this thread's first column; acc_col_offset gives the rest
  static_assert(kRows == 2, "a thread holds two rows of a 64-row wgmma accumulator");

  auto issue_qk = [&](int stage) {
    mma_qk.accumulate_ = GMMA::ScaleOut::Zero;
    warpgroup_fence_operand(tSrS);
    warpgroup_arrive();
#pragma unroll
    for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
      cute::gemm(mma_qk, tSrQ(_, _, kb), tSrK(_, _, kb, stage), tSrS);
      mma_qk.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
  };
  // P (rounded to the input type) is the A operand of P · V: it must stay as it is in its
  // registers until that wgmma has completed.
  Tensor tOrP = make_tensor_like<T>(tSrS);
  uint32_t* p_words = reinterpret_cast<uint32_t*>(raw_pointer_cast(tOrP.data()));
  constexpr int kPWords = int(size(decltype(tSrS.layout()){})) / 2;
  auto fence_p = [&] {
#pragma unroll
    for (int i = 0; i < kPWords; ++i) asm volatile("" : "+r"(p_words[i])::"memory");
  };
  Tensor tOrPa = make_tensor(tOrP.data(), acc_as_a_operand(tOrP.layout()));
  auto issue_pv = [&](int stage) {
    fence_p();
    warpgroup_fence_operand(tOrO);
    warpgroup_arrive();
#pragma unroll
    for (int kb = 0; kb < size<2>(tOrPa); ++kb) cute::gemm(mma_pv, tOrPa(_, _, kb), tOrV(_, _, kb, stage), tOrO);
    warpgroup_commit_batch();
  };

  PipelineState state;
  int iteration = 0;
  for (int u = blockIdx.x; u < p.total_work * p.kv_splits; u += gridDim.x, ++iteration) {
    const int split = u % p.kv_splits;
    const WorkTile wt = work_tile<kCausal>(p, u / p.kv_splits);
    clear(tOrO);
    float row_max[kRows], row_sum[kRows], correction[kRows];
    int64_t q_position[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
      q_position[r] = wt.qseg.position + wt.m_local + get<0>(S_coord(r, 0));
    }

    // The key tiles this query tile needs, as one sequence (segment s, tile t of it).
    // This unit's share of them: tiles [tile_begin, tile_begin + total_tiles) of that sequence.
    int64_t tile_begin, tile_end;
    split_range(kv_tiles_total(p, wt.last_q_position, kCausal, kBlockN), split, p.kv_splits, tile_begin, tile_end);
    const int64_t total_tiles = tile_end - tile_begin;
    int seg_index = 0;
    int64_t seg_tile = 0;
    int64_t seg_tiles = p.kv_segments > 0 ? kv_tiles_needed(p, 0, wt.last_q_position, kCausal, kBlockN) : 0;
    auto next_tile = [&] {
      ++seg_tile;
      while (seg_tile >= seg_tiles && seg_index + 1 < p.kv_segments) {
        ++seg_index;
        seg_tile = 0;
        seg_tiles = kv_tiles_needed(p, seg_index, wt.last_q_position, kCausal, kBlockN);
      }
    };
    // Walk to the first tile of the range (a segment with no tiles is passed over).
    while (seg_index + 1 < p.kv_segments && seg_tiles <= tile_begin) {
      tile_begin -= seg_tiles;
      seg_tiles = kv_tiles_needed(p, ++seg_index, wt.last_q_position, kCausal, kBlockN);
    }
    seg_tile = tile_begin;

    // Masks S (rows past the segment's end; with causal, keys after the query's position), turns
    // it into exp2(S · scale − new max) in place and sets each row's rescale of what came before.
    auto softmax_tile = [&] {
      const Segment seg = p.kv_segment[seg_index];
      const int64_t row0 = seg_tile * kBlockN;  // within the segment
      const int64_t tile_rows = seg.rows - row0;
      const bool edge = tile_rows < kBlockN ||
                        (kCausal && seg.position + row0 + kBlockN - 1 > wt.qseg.position + wt.m_local);
      if (edge) {
        // Per row, the last key column it may see; per element one 32-bit compare against the
        // column's fixed offset from the thread's first (64-bit column indices kept per element
        // would hold ~50 registers across the loop, and the register pressure would make the
        // compiler wait for P·V before the softmax instead of running them together).
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          int64_t last = (tile_rows < kBlockN ? tile_rows : kBlockN) - 1;
          if (kCausal) {
            const int64_t visible = q_position[r] - (seg.position + row0);
            last = visible < last ? visible : last;
          }
          const int limit = int(last < -1 ? -1 : last) - col_base;
#pragma unroll
          for (int c = 0; c < size<1>(S); ++c)
            if (acc_col_offset(c) > limit) S(r, c) = -INFINITY;
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        // Four independent chains for the max and the sum: with two consumer warps per scheduler
        // there is little else to issue while one long dependent chain drains.
        constexpr int kCols = size<1>(decltype(S.layout()){});
        static_assert(kCols % 4 == 0, "a thread's columns split into four chains");
        float m4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
        for (int c = 0; c < kCols; ++c) m4[c % 4] = fmaxf(m4[c % 4], S(r, c));
        float m = fmaxf(fmaxf(m4[0], m4[1]), fmaxf(m4[2], m4[3]));
        m = fmaxf(row_max[r], quad_max(m) * p.scale_log2);
        const float m_safe = m == -INFINITY ? 0.0f : m;
        correction[r] = exp2_ftz(row_max[r] - m_safe);
        row_max[r] = m;
        float sum4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const float e = exp2_ftz(fmaf(S(r, c), p.scale_log2, -m_safe));
          S(r, c) = e;
          sum4[c % 4] += e;
        }
        row_sum[r] = row_sum[r] * correction[r] + ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
      }
    };
    // Whether any row of the warp changed its max (its correction is not exactly 1): a settled
    // row's rescale is a multiply by 1, skipped when that holds for the whole warp.
    auto max_changed_in_warp = [&] {
      bool changed = false;
#pragma unroll
      for (int r = 0; r < kRows; ++r) changed |= correction[r] != 1.0f;
      return __any_sync(0xffffffffu, changed);
    };
    auto rescale_o = [&] {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int c = 0; c < size<1>(O); ++c) O(r, c) *= correction[r];
    };
    auto round_p = [&] {
#pragma unroll
      for (int i = 0; i < kPWords; ++i) p_words[i] = pack2<T>(tSrS(2 * i), tSrS(2 * i + 1));
    };

    cutlass::arch::ClusterTransactionBarrier::wait(&smem.q_full, iteration & 1);
    // Software-pipelined within the warp group: S(j+1) = Q · K(j+1)ᵀ and O += P(j) · V(j) are
    // both in flight while the softmax of tile j+1 runs; O is rescaled once P(j) · V(j) landed.
    if (total_tiles > 0) {
      pipe_k.consumer_wait(state);
      issue_qk(state.index());
      warpgroup_wait<0>();
      warpgroup_fence_operand(tSrS);
      pipe_k.consumer_release(state);
      softmax_tile();
      round_p();  // O is still zero: nothing to rescale
      for (int64_t j = 1; j < total_tiles; ++j) {
        const PipelineState previous = state;
        ++state;
        next_tile();
        pipe_k.consumer_wait(state);
        issue_qk(state.index());
        pipe_v.consumer_wait(previous);
        issue_pv(previous.index());
        warpgroup_wait<1>();  // S(j) has landed (P(j-1) · V(j-1) may still run)
        warpgroup_fence_operand(tSrS);
        pipe_k.consumer_release(state);
        softmax_tile();
        // The softmax must run while P(j-1)·V(j-1) is in flight. The fence keeps the compiler from
        // sinking it below the wait; and the wait sits in the arms of a warp-uniform branch that
        // follows the softmax, because ptxas schedules within a basic block and there it hoists
        // the wait (which has no register operands) above the softmax, serialising the two. The
        // two waits differ in text so that the compiler does not merge them above the branch.
        warpgroup_fence_operand(tSrS);
        if (max_changed_in_warp()) {
          asm volatile("wgmma.wait_group.sync.aligned 0; // then rescale O" ::: "memory");
          warpgroup_fence_operand(tOrO);
          rescale_o();
        } else {
          asm volatile("wgmma.wait_group.sync.aligned 0; // O stays" ::: "memory");
          warpgroup_fence_operand(tOrO);
        }
        fence_p();
        pipe_v.consumer_release(previous);
        round_p();
      }
      cutlass::arch::ClusterBarrier::arrive(&smem.q_empty);  // the last read of Q has landed
      pipe_v.consumer_wait(state);
      issue_pv(state.index());
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      fence_p();
      pipe_v.consumer_release(state);
      ++state;
    } else {
      cutlass::arch::ClusterBarrier::arrive(&smem.q_empty);
    }

    // Normalise, store O and the log-sum-exp (or, for one split of the keys, this split's fp32
    // output and base-2 log-sum-exp for the combine kernel).
    T* o_base = p.o + int64_t(wt.batch) * p.o_stride[0] + int64_t(wt.head) * p.o_stride[2];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float sum = quad_sum(row_sum[r]);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int row = get<0>(O_coord(r, 0));
      if (row >= wt.q_rows) continue;
      if (p.kv_splits > 1) {
        const int64_t index = ((int64_t(split) * p.batch + wt.batch) * p.q_heads + wt.head) * p.q_rows + wt.q_row0 + row;
        float* o_row = p.partial_o + index * D;
#pragma unroll
        for (int c = 0; c < size<1>(O); c += 2)
          *reinterpret_cast<float2*>(o_row + get<1>(O_coord(r, c))) = make_float2(O(r, c) * inv, O(r, c + 1) * inv);
        if (lane % 4 == 0) p.partial_lse[index] = sum > 0.0f ? row_max[r] + log2f(sum) : -INFINITY;
        continue;
      }
      T* o_row = o_base + (wt.q_row0 + row) * p.o_stride[1];
#pragma unroll
      for (int c = 0; c < size<1>(O); c += 2) {
        const int col = get<1>(O_coord(r, c));
        *reinterpret_cast<uint32_t*>(o_row + col) = pack2<T>(O(r, c) * inv, O(r, c + 1) * inv);
      }
      if (p.lse != nullptr && lane % 4 == 0)
        p.lse[(int64_t(wt.batch) * p.q_heads + wt.head) * p.q_rows + wt.q_row0 + row] =
            sum > 0.0f ? (row_max[r] + log2f(sum)) * 0.69314718055994530942f : -INFINITY;
    }
  }
}

// Merges the key splits of a split launch: per query row, O = sum_s w_s O_s / sum_s w_s with
// w_s = 2^(lse_s - max lse), and lse = max + log2(sum_s w_s) (stored in natural log). One warp per
// row (batch, head, row), each lane D/32 contiguous columns. A row no split saw: zeros, -inf.
template <class T, int D>
__global__ void __launch_bounds__(256) fmha_combine_kernel(const __grid_constant__ FmhaParams<T, D> p) {
  constexpr int kPerLane = D / 32;
  const int64_t rows = int64_t(p.batch) * p.q_heads * p.q_rows;
  const int64_t index = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (index >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t split_stride = rows;
  float m = -INFINITY;
  for (int s = 0; s < p.kv_splits; ++s) m = fmaxf(m, p.partial_lse[s * split_stride + index]);
  float acc[kPerLane] = {};
  float weights = 0.0f;
  if (m != -INFINITY) {
    for (int s = 0; s < p.kv_splits; ++s) {
      const float lse = p.partial_lse[s * split_stride + index];
      if (lse == -INFINITY) continue;
      const float w = exp2_ftz(lse - m);
      weights += w;
      const float* o = p.partial_o + (s * split_stride + index) * D + lane * kPerLane;
#pragma unroll
      for (int i = 0; i < kPerLane; i += 2) {
        const float2 v = *reinterpret_cast<const float2*>(o + i);
        acc[i] = fmaf(w, v.x, acc[i]);
        acc[i + 1] = fmaf(w, v.y, acc[i + 1]);
      }
    }
  }
  const float inv = weights > 0.0f ? 1.0f / weights : 0.0f;
  const int64_t row = index % p.q_rows;
  const int64_t head = (index / p.q_rows) % p.q_heads;
  const int64_t batch = index / (int64_t(p.q_rows) * p.q_heads);
  T* o = p.o + batch * p.o_stride[0] + row * p.o_stride[1] + head * p.o_stride[2] + lane * kPerLane;
#pragma unroll
  for (int i = 0; i < kPerLane; i += 2) *reinterpret_cast<uint32_t*>(o + i) = pack2<T>(acc[i] * inv, acc[i + 1] * inv);
  if (p.lse != nullptr && lane == 0)
    p.lse[index] = weights > 0.0f ? (m + log2f(weights)) * 0.69314718055994530942f : -INFINITY;
}

}  // namespace detail
}  // namespace tilelink::attention
