// src/ops/moe/moe_rs_kernels.cuh — the top-k weighted sums and the ReduceScatter of moe_rs.
//
//   moe_topk_sum_kernel    out[i] = Σ_j topk_weights[t, j] · y_sorted[row of (t, j)] for tokens
//                          t = first + i (one warp per token, fp32 sums): the whole job at one
//                          rank, the partial NCCL reduce-scatters on the decomposed path.
//   moe_rs_fused_kernel    beside the grouped GEMM: for each destination rank in chunk order, wait
//                          until every GEMM tile of its rows is stored (count_wait), write the
//                          weighted sums of its tokens (fp32) into that rank's receive buffer
//                          (NVLink stores), and publish each block's share there; then add the
//                          ranks' partials of this rank's own tokens, in rank order, into out.
//                          How a share reaches its rank is a policy: stores (LoadStoreShare) or
//                          a put-with-signal from a local copy (moe_nvshmem.cu).
// Included by src/ops/moe/moe_rs.cu and, for the NVSHMEM form, src/ops/moe/moe_nvshmem.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "tilelink/ops/common/vec8.cuh"
#include "tilelink/tile.cuh"

namespace tilelink::ops {

inline constexpr int kMoeRsThreads = 512;

struct MoeTopkSum {
  const char* y_sorted;  // [entries, hidden] (the grouped GEMM's output)
  const int32_t* entry_row;
  const float* topk_weights;
  int32_t topk;
  int64_t hidden;
};

struct MoeRsFusedParams {
  ll::Team team;
  MoeTopkSum sum;
  int64_t tokens_per_rank;
  const uint64_t* chunk_count;  // local [world]: counting signals of the GEMM tiles per chunk
  const int32_t* group_end;     // the routing's groups (chunk-major, `experts` per chunk)
  int32_t experts;
  int32_t tile_m, tiles_n;      // the grouped GEMM's tile rows and tiles per row of output
  float* recv;                  // symmetric [world (source)][tokens_per_rank][hidden]
  uint64_t* recv_slots;         // symmetric [blocks][world (source)] (peer_tile_notify's layout)
  const uint64_t* ready;        // symmetric [world]: rank q read its previous call's partials
  void* out;                    // [tokens_per_rank, hidden]
  float* send = nullptr;        // symmetric [world (destination)][tokens_per_rank][hidden]: the
                                // shares put over NVSHMEM are written here first (else unused)
};

#if defined(__CUDACC__)
namespace detail {

// The grouped GEMM tiles of chunk c: each of its groups' rows in tile_m-row tiles, tiles_n wide.
TL_DEVICE uint32_t chunk_tiles(const MoeRsFusedParams& p, int32_t c) {
  uint32_t tiles = 0;
  for (int32_t g = c * p.experts; g < (c + 1) * p.experts; ++g) {
    const int32_t rows = p.group_end[g] - (g == 0 ? 0 : p.group_end[g - 1]);
    tiles += uint32_t((rows + p.tile_m - 1) / p.tile_m) * uint32_t(p.tiles_n);
  }
  return tiles;
}

// 8 columns [v*8, v*8 + 8) of token t's weighted sum over its top-k rows.
template <class T>
TL_DEVICE void topk_sum8(const MoeTopkSum& s, int64_t t, int64_t v, float* acc) {
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.f;
  for (int32_t j = 0; j < s.topk; ++j) {
    const int32_t row = s.entry_row[t * s.topk + j];
    if (row < 0) continue;  // an invalid expert id contributes nothing
    Vec8<T>::add_scaled(acc, reinterpret_cast<const uint4*>(s.y_sorted + int64_t(row) * s.hidden * 2)[v],
                        s.topk_weights[t * s.topk + j]);
  }
}

}  // namespace detail

template <class T>
__global__ void __launch_bounds__(256) moe_topk_sum_kernel(const MoeTopkSum s, T* out, int64_t first, int64_t count) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32, warps = int64_t(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t i = warp; i < count; i += warps)
    for (int64_t v = lane; v < s.hidden / 8; v += 32) {
      float acc[8];
      detail::topk_sum8<T>(s, first + i, v, acc);
      reinterpret_cast<uint4*>(out + i * s.hidden)[v] = Vec8<T>::pack(acc);
    }
}

// The share of block b (rows [lo, hi) of dst's tokens) written straight into dst's receive slot
// for this rank, then published there.
struct LoadStoreShare {
  static TL_DEVICE float* slot(const MoeRsFusedParams& p, int32_t dst) {
    return tile::peer_view(p.team, p.recv + int64_t(p.team.rank) * p.tokens_per_rank * p.sum.hidden, dst);
  }
  static TL_DEVICE void publish(const MoeRsFusedParams& p, const tile::SlotPerTile& blocks, float*, int64_t, int64_t,
                                int32_t dst) {
    tile::peer_tile_notify(tile::Block{}, p.team, blocks, p.recv_slots, int32_t(blockIdx.x), dst);
  }
  static TL_DEVICE void finish() {}
};

template <class T, class Share = LoadStoreShare>
__global__ void __launch_bounds__(kMoeRsThreads) moe_rs_fused_kernel(const MoeRsFusedParams p) {
  const int32_t world = p.team.num_ranks, me = p.team.rank;
  const int64_t m = p.tokens_per_rank, h = p.sum.hidden;
  const int64_t lo = m * blockIdx.x / gridDim.x, hi = m * (blockIdx.x + 1) / gridDim.x;
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = threadIdx.x % 32;
  const tile::SlotPerTile blocks{int32_t(gridDim.x)};  // block b's rows: its own slot per source
  for (int32_t c = 0; c < world; ++c) {
    const int32_t dst = (me + 1 + c) % world;
    tile::count_wait(tile::Block{}, p.team, p.chunk_count + c, detail::chunk_tiles(p, c), c);
    // dst's receive buffer is free once it began this call (it read the last one's before).
    if (dst != me) tile::rank_wait(tile::Block{}, p.team, p.ready, dst);
    float* slot = Share::slot(p, dst);  // where my partials for dst go
    for (int64_t i = lo + warp; i < hi; i += warps)
      for (int64_t v = lane; v < h / 8; v += 32) {
        float acc[8];
        detail::topk_sum8<T>(p.sum, int64_t(dst) * m + i, v, acc);
        float4* d = reinterpret_cast<float4*>(slot + i * h) + 2 * v;
        d[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        d[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
      }
    Share::publish(p, blocks, slot, lo, hi, dst);
  }
  // Every rank's partial of this block's rows of my tokens, added in rank order (the same sum on
  // any layout, whatever order the partials arrived in).
  if (threadIdx.x == 0)
    for (int32_t src = 0; src < world; ++src)
      tile::peer_tile_wait(tile::Thread{}, p.team, blocks, p.recv_slots, int32_t(blockIdx.x), src);
  __syncthreads();
  T* out = static_cast<T*>(p.out);
  for (int64_t i = lo + warp; i < hi; i += warps)
    for (int64_t v = lane; v < h / 8; v += 32) {
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      for (int32_t src = 0; src < world; ++src) {
        const float4* s = reinterpret_cast<const float4*>(p.recv + (int64_t(src) * m + i) * h) + 2 * v;
        const float4 a = s[0], b = s[1];
        acc[0] += a.x, acc[1] += a.y, acc[2] += a.z, acc[3] += a.w;
        acc[4] += b.x, acc[5] += b.y, acc[6] += b.z, acc[7] += b.w;
      }
      reinterpret_cast<uint4*>(out + i * h)[v] = Vec8<T>::pack(acc);
    }
  Share::finish();
}

// Arms the per-chunk counting signals of this call (one thread per chunk).
static __global__ void moe_rs_arm_kernel(const ll::Team team, uint64_t* counters, int32_t chunks) {
  const int32_t c = int32_t(threadIdx.x);
  if (c < chunks) tile::count_arm(tile::Thread{}, team, counters + c);
}
#endif

}  // namespace tilelink::ops
