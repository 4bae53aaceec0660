// bench/trivial_signal_hooks.cuh — hooks whose waits are always satisfied and whose notifies go
// nowhere: the signal traffic of a fused op at world size 1, for measuring the engine's hook cost
// (tilelink-bench gemm --with-hooks) without any communication. A benchmark tool, not library API.
#pragma once

#include <cstdint>

#include "tilelink/gemm/hooks.cuh"
#include "tilelink/ll/memory_order.cuh"

namespace tilelink::gemm {

// before_load: one lane acquires a flag that is already set (like consumer_tile_wait on a chunk
// that has arrived), then every lane fences the async proxy. after_store: one release-add into a
// per-tile counter (like producer_tile_notify). order_m: rotation (like "start on local rows").
template <bool Eager>
struct TrivialSignalHooks {
  static constexpr bool kWaitsBeforeLoad = true;
  static constexpr bool kNotifiesAfterStore = true;
  static constexpr bool kReordersM = true;
  static constexpr bool kNotifyEagerly = Eager;

  const uint64_t* ready = nullptr;  // *ready >= 1 before the launch
  uint64_t* tile_flags = nullptr;   // tiles_m * tiles_n counters
  int32_t tiles_n = 1;              // tiles along N (tile index = m_blk * tiles_n + n_blk)
  int32_t first_unit = 0;           // M unit visited first

#if defined(__CUDACC__)
  TL_DEVICE int order_m(int unit, int num_units, int /*rows_per_unit*/) const {
    int u = unit + first_unit % num_units;
    return u >= num_units ? u - num_units : u;
  }
  TL_DEVICE void before_load(const TileCoord&) const {
    if ((threadIdx.x & 31) == 0) {
      while (ll::ld_acquire_sys(ready) < 1) {
      }
    }
    __syncwarp();
    ll::fence_proxy_async_global();
  }
  TL_DEVICE void after_store(const TileCoord& t) const {
    ll::red_add_release_sys(&tile_flags[int64_t(t.m_blk) * tiles_n + t.n_blk], 1);
  }
#endif
};

using TrivialSignalHooksEager = TrivialSignalHooks<true>;
using TrivialSignalHooksDeferred = TrivialSignalHooks<false>;

}  // namespace tilelink::gemm
