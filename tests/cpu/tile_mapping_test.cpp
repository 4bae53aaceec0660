// CPU tests of the tile layer's mappings and tile orders: pure integer arithmetic, so every
// property the fused ops rely on is checked exhaustively over many shapes here, in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "tilelink/tile/mapping.cuh"
#include "tilelink/tile/order.cuh"

namespace tilelink::tile {
namespace {

// Every row belongs to exactly one chunk; chunks tile each rank's rows in order; a row range
// waits exactly on the chunks that hold its rows.
TEST(RowChunkMapping, ChunksPartitionRowsAndWaitsCoverExactly) {
  for (int ranks : {1, 2, 3, 4, 8}) {
    for (int rows_per_rank : {1, 7, 64, 100, 128, 1000, 1024}) {
      for (int chunk_rows : {1, 16, 128, 333, 4096}) {
        auto m = RowChunkMapping::make(rows_per_rank, chunk_rows, ranks);
        const int total = rows_per_rank * ranks;
        std::vector<int> owner_chunk(total, -1);
        for (int t = 0; t < m.num_tiles(); ++t) {
          RowRange rr = m.rows(t);
          ASSERT_GT(rr.count, 0);
          ASSERT_EQ(m.owner(t), rr.begin / rows_per_rank) << "chunk " << t;
          ASSERT_EQ(m.notify_slot(t), t);
          for (int r = rr.begin; r < rr.end(); ++r) {
            ASSERT_EQ(owner_chunk[r], -1) << "row " << r << " in two chunks";
            owner_chunk[r] = t;
          }
        }
        for (int r = 0; r < total; ++r) {
          ASSERT_NE(owner_chunk[r], -1) << "row " << r << " in no chunk";
          ASSERT_EQ(m.tile_of_row(r), owner_chunk[r]);
        }
        // Consumer ranges of a GEMM tile (any height, any start).
        for (int tile_rows : {1, 64, 128, 256}) {
          for (int start = 0; start < total; start += std::max(1, total / 7)) {
            RowRange rr{start, std::min(tile_rows, total - start)};
            SlotRange s = m.wait_slots(rr);
            std::set<int> need;
            for (int r = rr.begin; r < rr.end(); ++r) need.insert(owner_chunk[r]);
            ASSERT_EQ(s.size(), int(need.size()));
            ASSERT_EQ(s.begin, *need.begin());
            ASSERT_EQ(s.end - 1, *need.rbegin());
          }
        }
      }
    }
  }
}

TEST(RowChunkMapping, ChunkRowsClampToShard) {
  auto m = RowChunkMapping::make(10, 128, 4);
  EXPECT_EQ(m.chunk_rows, 10);
  EXPECT_EQ(m.chunks_per_rank, 1);
  EXPECT_EQ(m.num_tiles(), 4);
  EXPECT_TRUE(m.wait_slots(RowRange{5, 0}).empty());
}

TEST(TileGridMapping, OwnersSlotsAndRowBands) {
  for (int ranks : {1, 2, 4, 8}) {
    for (int m_rows : {128 * 8, 8192, 1000 * 8}) {
      for (int n : {1376, 4096}) {
        auto g = TileGridMapping::make(m_rows, n, 128, 256, ranks);
        ASSERT_EQ(g.tiles_m, (m_rows + 127) / 128);
        ASSERT_EQ(g.tiles_n, (n + 255) / 256);
        std::set<int> slots;
        for (int mb = 0; mb < g.tiles_m; ++mb)
          for (int nb = 0; nb < g.tiles_n; ++nb) {
            int t = g.tile(mb, nb);
            ASSERT_TRUE(slots.insert(g.notify_slot(t)).second);
            ASSERT_EQ(g.owner(t), mb * 128 / g.rows_per_rank);
            SlotRange one = g.wait_slots(t);
            ASSERT_EQ(one.begin, t);
            ASSERT_EQ(one.size(), 1);
          }
        // A rank's row band depends on all column tiles of the m-blocks overlapping it.
        for (int r = 0; r < ranks; ++r) {
          RowRange band{r * g.rows_per_rank, g.rows_per_rank};
          SlotRange s = g.wait_slots(band);
          ASSERT_EQ(s.begin, (band.begin / 128) * g.tiles_n);
          ASSERT_EQ(s.end, ((band.end() - 1) / 128 + 1) * g.tiles_n);
        }
      }
    }
  }
}

TEST(TableMapping, ReadsItsTables) {
  std::vector<int32_t> owner = {2, 0, 1}, slot = {5, 3, 4}, dep_b = {0, 2, 2}, dep_e = {2, 2, 6};
  TableMapping m{owner.data(), slot.data(), dep_b.data(), dep_e.data(), 3};
  EXPECT_EQ(m.num_tiles(), 3);
  EXPECT_EQ(m.owner(0), 2);
  EXPECT_EQ(m.notify_slot(1), 3);
  EXPECT_TRUE(m.wait_slots(1).empty());
  EXPECT_EQ(m.wait_slots(2).begin, 2);
  EXPECT_EQ(m.wait_slots(2).end, 6);
}

// Orders must be permutations, start where they say, and the ring rank orders must be inverse
// to each other (what rank r sends at step s is what rank r-s receives at step s).
TEST(TileOrder, RotateIsAPermutationStartingAtStart) {
  for (int n : {1, 2, 5, 64, 131}) {
    for (int start : {0, 1, n - 1, n, 3 * n + 2}) {
      Rotate o{start};
      std::vector<int> seen(n, 0);
      for (int i = 0; i < n; ++i) {
        int u = o(i, n);
        ASSERT_GE(u, 0);
        ASSERT_LT(u, n);
        seen[u]++;
      }
      ASSERT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
      ASSERT_EQ(o(0, n), start % n);
    }
  }
  Identity id;
  EXPECT_EQ(id(7, 9), 7);
}

TEST(TileOrder, RingOrdersArePermutationsAndPairUp) {
  for (int w : {1, 2, 3, 8}) {
    for (int r = 0; r < w; ++r) {
      std::set<int> next, prev;
      for (int s = 0; s < w; ++s) {
        next.insert(ring_next(r, s, w));
        prev.insert(ring_prev(r, s, w));
        // Push: r sends its shard to ring_prev(r, s) at step s; that rank pulls from
        // ring_next(., s) at step s — the same pair.
        ASSERT_EQ(ring_next(ring_prev(r, s, w), s, w), r);
      }
      ASSERT_EQ(int(next.size()), w);
      ASSERT_EQ(int(prev.size()), w);
      ASSERT_EQ(ring_next(r, 0, w), r);
      ASSERT_EQ(ring_prev(r, 0, w), r);
    }
  }
}

TEST(TileOrder, LocalFirstRotationStartsOnOwnRows) {
  // AllGather-GEMM: rank r's first M unit holds its first row.
  const int rows_per_unit = 256;
  for (int w : {2, 4, 8}) {
    const int rows_per_rank = 1024, units = w * rows_per_rank / rows_per_unit;
    for (int r = 0; r < w; ++r) {
      Rotate o{unit_of_row(r * rows_per_rank, rows_per_unit)};
      ASSERT_EQ(o(0, units) * rows_per_unit, r * rows_per_rank);
    }
  }
}

}  // namespace
}  // namespace tilelink::tile

namespace tilelink::tile {
namespace {

TEST(GroupChunkMapping, EveryGroupWaitsForExactlyItsChunksProducers) {
  // ag_moe: groups (chunk, expert), blocks of the gather publish one slot per chunk each.
  for (int experts : {1, 8, 60}) {
    for (int producers : {1, 3, 16}) {
      for (int chunks : {1, 2, 5, 8}) {
        const GroupChunkMapping m{experts, producers, chunks};
        ASSERT_EQ(m.num_tiles(), chunks * producers);
        std::set<int> slots;
        for (int c = 0; c < chunks; ++c)
          for (int p = 0; p < producers; ++p) slots.insert(m.notify_slot(m.tile(c, p)));
        ASSERT_EQ(int(slots.size()), m.num_tiles());  // no two producers share a slot
        for (int g = 0; g < chunks * experts; ++g) {
          const SlotRange r = m.wait_slots(g);
          ASSERT_EQ(r.size(), producers);
          for (int p = 0; p < producers; ++p) ASSERT_EQ(r.begin + p, m.notify_slot(m.tile(g / experts, p)));
        }
      }
    }
  }
}

}  // namespace
}  // namespace tilelink::tile
