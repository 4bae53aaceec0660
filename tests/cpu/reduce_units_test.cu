// How GEMM-ReduceScatter / GEMM-AllReduce cut their work (ops/common/row_blocks.cuh) and size
// their workers (reduce_worker_warps in ops/common/reduce_kernels.cuh), checked on the host.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "tilelink/ops/common/reduce_kernels.cuh"

namespace {

using tilelink::ops::RowBlocks;
using tilelink::ops::Unit;

struct Case {
  int32_t m, n, tile_m, tile_n, world;
};

// Every output element belongs to exactly one unit; a unit lies in one rank block and one GEMM
// tile; unit slots are distinct and within num_unit_slots(); num_units() counts them all.
TEST(ReduceUnits, UnitsPartitionTheOutputByRankBlockAndTile) {
  const Case cases[] = {{1024, 4096, 128, 128, 8}, {832, 264, 128, 128, 8}, {8, 1024, 128, 128, 8},
                        {48, 72, 64, 128, 2},      {8192, 1376, 128, 192, 2}, {37 * 4, 24, 128, 256, 4},
                        {129, 512, 64, 128, 1},
                        // The all-reduce's uneven blocks: W does not divide M, and M < W (empty blocks).
                        {129, 512, 64, 128, 2},    {1000, 264, 128, 128, 7}, {3, 64, 64, 128, 5},
                        {1, 8, 128, 128, 8},       {517, 1376, 128, 192, 6}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "m " << c.m << " n " << c.n << " tile " << c.tile_m << "x" << c.tile_n
                                      << " world " << c.world);
    const RowBlocks rb = RowBlocks::make(c.m, c.n, c.tile_m, c.tile_n, c.world);
    std::vector<int> owner(size_t(c.m) * c.n, 0);
    std::set<int32_t> slots;
    int32_t units = 0;
    for (int32_t b = 0; b < c.world; ++b) {
      for (int32_t i = 0; i < rb.units_in_block(b); ++i, ++units) {
        const Unit u = rb.unit(b, i);
        ASSERT_GT(u.rows, 0);
        ASSERT_GT(u.cols, 0);
        EXPECT_GE(u.row0, rb.block_begin(b));
        EXPECT_LE(u.row0 + u.rows, rb.block_begin(b + 1));
        EXPECT_EQ(u.row0 / c.tile_m, (u.row0 + u.rows - 1) / c.tile_m) << "unit straddles GEMM tiles";
        EXPECT_EQ(u.col0 % c.tile_n, 0);
        EXPECT_EQ(u.cols % 8, 0) << "16-byte accesses need 8-column multiples";
        const int32_t slot = rb.unit_slot(u);
        EXPECT_TRUE(slots.insert(slot).second) << "slot " << slot << " used twice";
        EXPECT_LT(slot, rb.num_unit_slots());
        for (int32_t r = u.row0; r < u.row0 + u.rows; ++r)
          for (int32_t col = u.col0; col < u.col0 + u.cols; ++col) ++owner[size_t(r) * c.n + col];
      }
    }
    EXPECT_EQ(units, rb.num_units());
    // Blocks tile the rows in order and differ by at most one row.
    EXPECT_EQ(rb.block_begin(0), 0);
    EXPECT_EQ(rb.block_begin(c.world), c.m);
    for (int32_t b = 0; b < c.world; ++b) {
      EXPECT_GE(rb.block_rows(b), c.m / c.world);
      EXPECT_LE(rb.block_rows(b), c.m / c.world + 1);
      if (c.m % c.world == 0) EXPECT_EQ(rb.block_begin(b), b * rb.rows_per_rank());
    }
    int64_t uncovered = 0, twice = 0;
    for (int v : owner) {
      if (v == 0) ++uncovered;
      if (v > 1) ++twice;
    }
    EXPECT_EQ(uncovered, 0);
    EXPECT_EQ(twice, 0);
  }
}

TEST(ReduceUnits, WorkerWidthKeepsEveryWorkerBusy) {
  constexpr int kWarpsPerBlock = tilelink::ops::kReduceThreads / 32;
  for (int blocks : {1, 2, 16, 18, 32, 48}) {
    for (int64_t units : {int64_t(1), int64_t(7), int64_t(64), int64_t(128), int64_t(300), int64_t(2048),
                          int64_t(1) << 20}) {
      const int warps = tilelink::ops::reduce_worker_warps(units, blocks);
      EXPECT_GE(warps, 1);
      EXPECT_LE(warps, kWarpsPerBlock);
      EXPECT_EQ(warps & (warps - 1), 0) << "a power of two, so workers tile the block";
      const int64_t workers = int64_t(blocks) * (kWarpsPerBlock / warps);
      if (warps < kWarpsPerBlock) EXPECT_LE(workers, units) << "blocks " << blocks << " units " << units;
      if (warps > 1) EXPECT_GT(workers * 2, units) << "narrower workers would all have had a unit";
    }
  }
  // Many units: one warp each (the reduce-scatter case: 2048 units on 32 blocks).
  EXPECT_EQ(tilelink::ops::reduce_worker_warps(2048, 32), 1);
  // Decode all-reduce: 128 units on 16 blocks -> 2-warp workers, 128 of them.
  EXPECT_EQ(tilelink::ops::reduce_worker_warps(128, 16), 2);
}

}  // namespace
