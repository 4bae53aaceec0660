// src/ops/allgather_ll/allgather_ll_kernel.cuh — the allgather_ll kernel, with how a block sends
// its granules to the peers as a policy: stores into the peers' buffers (load/store peers,
// LoadStoreSend) or a put of the words packed in this rank's own slot (NVSHMEM,
// allgather_ll_nvshmem.cu).
//
// Receive buffers: two (by epoch parity), each one slot per source rank of `cap` granules (16
// bytes each). The layout follows the workspace's capacity, not the call's size, so a call never
// writes where a slow peer may still read an earlier, larger call of the other parity. A rank's
// slot for itself receives nothing: the NVSHMEM form packs its words there.
// The call is this one kernel: it advances the device epoch itself (tile/kernel_call.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tilelink/ll/team.cuh"
#include "tilelink/tile/flagged.cuh"
#include "tilelink/tile/kernel_call.cuh"

namespace tilelink::ops {

inline constexpr int kAllgatherLlThreads = 512;

struct AllgatherLlParams {
  ll::Team team;
  const uint2* in;
  uint2* out;
  uint64_t* buffers;  // symmetric: [2][W][2 * cap] words
  int64_t granules;   // 8 bytes each, per rank
  int64_t cap;        // granules per source slot and parity
  uint64_t* arrivals; // tile::end_kernel_call's count of finished blocks
};

// The block's granules [g0, g1) of `in` into rank `to`'s slot for this rank.
struct LoadStoreSend {
  static TL_DEVICE void prepare(const ll::Team&, uint64_t*, const uint2*, int64_t, int64_t, uint32_t) {}
  static TL_DEVICE void send(const ll::Team& team, uint64_t* slot, const uint2* in, int64_t g0, int64_t g1,
                             uint32_t flag, int to) {
    tile::put_flagged(tile::Block{}, team, slot, in, g0, g1, flag, to);
  }
  static TL_DEVICE void finish() {}
};

template <class Send>
__global__ void __launch_bounds__(kAllgatherLlThreads) allgather_ll_kernel(const AllgatherLlParams p) {
  const ll::Team team = tile::begin_kernel_call(p.team);
  const uint64_t epoch = team.epoch;
  const uint32_t flag = uint32_t(epoch);
  const int me = team.rank, w = team.num_ranks;
  uint64_t* recv = p.buffers + int64_t(epoch & 1) * w * 2 * p.cap;
  uint64_t* my_slot = recv + int64_t(me) * 2 * p.cap;  // where peers receive my granules
  const int64_t per_block = (p.granules + gridDim.x - 1) / gridDim.x;
  const int64_t g0 = std::min<int64_t>(p.granules, blockIdx.x * per_block);
  const int64_t g1 = std::min<int64_t>(p.granules, g0 + per_block);
  // Send first (this block never waits before its data is on the way), nearest peer first.
  Send::prepare(team, my_slot, p.in, g0, g1, flag);
  for (int step = 1; step < w; ++step) Send::send(team, my_slot, p.in, g0, g1, flag, (me + step) % w);
  uint2* mine = p.out + int64_t(me) * p.granules;
  for (int64_t g = g0 + threadIdx.x; g < g1; g += blockDim.x) mine[g] = p.in[g];
  for (int step = 1; step < w; ++step) {
    const int from = (me - step + w) % w;
    tile::get_flagged(tile::Block{}, team, recv + int64_t(from) * 2 * p.cap, p.out + int64_t(from) * p.granules, g0,
                      g1, flag, tile::WaitSite{from, "allgather_ll"});
  }
  Send::finish();
  tile::end_kernel_call(tile::Block{}, p.team, epoch, p.arrivals);
}

}  // namespace tilelink::ops
