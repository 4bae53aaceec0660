// A Hooks type that records what the engine does with it, for hooks_test.cu. Instantiated for a
// few configs by tests/gpu/gemm/CMakeLists.txt (tilelink_gemm_instantiate).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "tilelink/gemm/hooks.cuh"
#include "tilelink/ll/memory_order.cuh"

namespace tltest {

struct HookRecord {
  int32_t* load_count;   // per tile (tiles_m x tiles_n)
  int32_t* store_count;  // per tile
  int32_t* load_seq;     // per tile: global sequence number of its (last) before_load
  int32_t* store_seq;    // per tile: global sequence number of its (last) after_store
  int32_t* seq;          // global counter
  int32_t* cta_pos;      // per CTA: number of tiles loaded so far
  int32_t* cta_log;      // per CTA: tile ids in load order (cap entries each)
  int32_t cta_log_cap;
  float* checksum;       // per tile: sum of the tile's D values, read in after_store
  int32_t* bad;          // [0]: order_m saw a wrong num_units/rows_per_unit, [1]: before_load
                         // on an empty tile, [2]: after_store with a wrong tile size
};

template <bool Eager>
struct RecordingHooks {
  static constexpr bool kWaitsBeforeLoad = true;
  static constexpr bool kNotifiesAfterStore = true;
  static constexpr bool kReordersM = true;
  static constexpr bool kNotifyEagerly = Eager;

  HookRecord rec{};
  const __nv_bfloat16* D = nullptr;
  int64_t ldd = 0;
  int32_t M = 0, N = 0;
  int32_t tile_m = 0, tile_n = 0, tiles_n = 0;
  int32_t units_m = 0, rows_per_unit = 0;
  int32_t perm_a = 1, perm_b = 0;  // order_m(u) = (perm_a * u + perm_b) mod units, gcd(perm_a, units) = 1

#if defined(__CUDACC__)
  __device__ int order_m(int unit, int num_units, int rpu) const {
    if (num_units != units_m || rpu != rows_per_unit) atomicAdd(&rec.bad[0], 1);
    return int((int64_t(perm_a) * unit + perm_b) % num_units);
  }
  __device__ int tile_id(const tilelink::gemm::TileCoord& t) const { return t.m_blk * tiles_n + t.n_blk; }

  __device__ void before_load(const tilelink::gemm::TileCoord& t) const {
    // A cluster's spare CTA announces its (empty in one dimension) tile too: it still loads its
    // multicast share for the partner. Only real tiles are recorded.
    if ((threadIdx.x & 31) == 0 && (t.rows <= 0 && t.cols <= 0)) atomicAdd(&rec.bad[1], 1);
    if ((threadIdx.x & 31) == 0 && t.rows > 0 && t.cols > 0) {
      const int id = tile_id(t);
      atomicAdd(&rec.load_count[id], 1);
      rec.load_seq[id] = atomicAdd(rec.seq, 1);
      const int cta = blockIdx.x + blockIdx.y * gridDim.x;
      const int pos = atomicAdd(&rec.cta_pos[cta], 1);
      if (pos < rec.cta_log_cap) rec.cta_log[int64_t(cta) * rec.cta_log_cap + pos] = id;
    }
    __syncwarp();
    tilelink::ll::fence_proxy_async_global();
  }

  __device__ void after_store(const tilelink::gemm::TileCoord& t) const {
    const int id = tile_id(t);
    const int rows = min(tile_m, M - t.row0), cols = min(tile_n, N - t.col0);
    if (t.rows != rows || t.cols != cols || t.row0 != t.m_blk * tile_m || t.col0 != t.n_blk * tile_n)
      atomicAdd(&rec.bad[2], 1);
    // The tile must be complete in global memory now: read it back (generic proxy) and sum it
    // in a fixed order; the host sums the final D the same way and compares bitwise. Loads go
    // to L2 (ld.cg): this SM's L1 may hold a stale line shared with a neighbouring tile.
    float s = 0.f;
    for (int r = 0; r < t.rows; ++r) {
      const unsigned short* row = reinterpret_cast<const unsigned short*>(D + int64_t(t.row0 + r) * ldd + t.col0);
      for (int c = 0; c < t.cols; ++c) s += __bfloat162float(__ushort_as_bfloat16(__ldcg(row + c)));
    }
    rec.checksum[id] = s;
    atomicAdd(&rec.store_count[id], 1);
    rec.store_seq[id] = atomicAdd(rec.seq, 1);
  }
#endif
};

using RecordingHooksDeferred = RecordingHooks<false>;
using RecordingHooksEager = RecordingHooks<true>;

}  // namespace tltest
