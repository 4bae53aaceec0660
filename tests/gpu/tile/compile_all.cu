// Every tile primitive instantiated at every cooperation scope for sm_90a, never launched: a
// primitive that stops compiling for a scope, or a scope that stops meeting the Coop concept, fails
// the build (CI builds it). tile_test checks what they do.
#include <gtest/gtest.h>

#include "tilelink/tile.cuh"
#include "tilelink/tile/kernel_call.cuh"

namespace {

using namespace tilelink;

template <class C>
__device__ void every_primitive(C coop, const ll::Team& t, uint64_t* slots, char* dst, const char* src,
                                uint64_t* counter) {
  const tile::RowChunkMapping rows{};
  const tile::SlotPerTile one_slot_each{4, 1};
  tile::producer_tile_notify<tile::Notify::local>(coop, t, rows, slots, 0);
  tile::producer_tile_notify<tile::Notify::owner>(coop, t, one_slot_each, slots, 0);
  tile::producer_tile_notify<tile::Notify::all_ranks>(coop, t, rows, slots, 0);
  tile::consumer_tile_wait(coop, t, rows, slots, tile::RowRange{0, 4});
  tile::consumer_tile_wait<tile::Spin::lean>(coop, t, one_slot_each, slots, 1);
  tile::peer_tile_notify(coop, t, rows, slots, 0, 1);
  tile::peer_tile_notify(coop, t, rows, slots, 0, tile::RankSet{0, 3, 1});
  tile::peer_tile_wait(coop, t, rows, slots, 0, 1);
  tile::rank_notify(coop, t, slots, 1);
  tile::rank_wait(coop, t, slots, 1);
  tile::rank_wait(coop, t, slots, 1, 7);
  tile::reads_done_notify(coop, t, counter, 1);
  tile::reads_done_wait(coop, t, counter, 3);
  tile::count_arm(coop, t, counter);
  tile::count_notify(coop, counter);
  tile::count_wait(coop, t, counter, 3, 0);
  tile::tile_push_data(coop, t, rows, 0, dst, src, 0, 64, slots, 1);
  tile::tile_pull_data(coop, t, rows, 0, dst, src, 64, slots, 1);
  if constexpr (!C::kOneThread)
    tile::tile_gather_rows(coop, t, dst, src, 64, 0, 4, [](int32_t i) { return int64_t(i); }, 1);
  tile::put_flagged(coop, t, counter, reinterpret_cast<const uint2*>(src), 0, 4, 1u, 1);
  tile::get_flagged(coop, t, counter, reinterpret_cast<uint2*>(dst), 0, 4, 1u, tile::WaitSite{0, "compile_all"});
}

__global__ void every_scope(ll::Team t, uint64_t* slots, char* dst, const char* src, uint64_t* counter) {
  const ll::Team call = tile::begin_kernel_call(t);
  every_primitive(tile::Thread{}, call, slots, dst, src, counter);
  every_primitive(tile::Warp{}, call, slots, dst, src, counter);
  every_primitive(tile::WarpSpan::of_block(4, 1), call, slots, dst, src, counter);
  every_primitive(tile::Block{}, call, slots, dst, src, counter);
  tile::end_kernel_call(tile::Block{}, t, call.epoch, counter);
}

}  // namespace

TEST(TileCompile, EveryPrimitiveAtEveryScopeBuildsForSm90aAndLoads) {
  // Asking for the kernel's attributes loads the sm_90a cubin.
  cudaFuncAttributes attr{};
  ASSERT_EQ(cudaFuncGetAttributes(&attr, every_scope), cudaSuccess);
  EXPECT_GT(attr.numRegs, 0);
}
