// Which ranks a Team's load/store table covers in a world larger than it.
#include "runtime/load_store_window.hpp"

#include <gtest/gtest.h>

#include "tilelink/ll/identity.cuh"

#include <vector>

namespace tilelink {
namespace {

char heap[1];

// A world of n ranks in which `me` maps the ranks [lo, hi) (its node) and nobody else.
std::vector<char*> node(int n, int lo, int hi) {
  std::vector<char*> bases(n, nullptr);
  for (int r = lo; r < hi; ++r) bases[r] = heap;
  return bases;
}

TEST(LoadStoreWindow, AWorldThatFitsStartsAtRankZero) {
  for (int n = 1; n <= 8; ++n)
    for (int me = 0; me < n; ++me) EXPECT_EQ(load_store_window(node(n, 0, n), me, 8), 0);
  EXPECT_EQ(load_store_window(node(4, 3, 4), 3, 8), 0);  // even when only this rank is mapped
}

TEST(LoadStoreWindow, TwoNodesOfEightCoverTheirOwnNode) {
  for (int me = 0; me < 8; ++me) EXPECT_EQ(load_store_window(node(16, 0, 8), me, 8), 0) << me;
  for (int me = 8; me < 16; ++me) EXPECT_EQ(load_store_window(node(16, 8, 16), me, 8), 8) << me;
}

TEST(LoadStoreWindow, TheWindowAlwaysHoldsTheRankAndStaysInTheWorld) {
  for (int n : {9, 16, 23, 1024})
    for (int me : {0, 1, 7, 8, n / 2, n - 2, n - 1}) {
      if (me >= n) continue;
      const int first = load_store_window(node(n, me, me + 1), me, 8);
      EXPECT_LE(first, me);
      EXPECT_GT(first + 8, me);
      EXPECT_GE(first, 0);
      EXPECT_LE(first + 8, n);
    }
}

TEST(LoadStoreWindow, NodesOfFourInAWorldOfTwelve) {
  // Ranks 4..7 on one node: the window holding all four of them, the lowest such start.
  for (int me = 4; me < 8; ++me) EXPECT_EQ(load_store_window(node(12, 4, 8), me, 8), 0) << me;
  // The last node (8..11): only windows that end at 12 hold all of it.
  for (int me = 8; me < 12; ++me) EXPECT_EQ(load_store_window(node(12, 8, 12), me, 8), 4) << me;
}

// The Team's table seen through ll::heap_base_of / symm_at / owner_of (their host forms; the
// device forms are the same arithmetic as a select chain).
TEST(LoadStoreWindow, TheTeamAnswersNullOutsideItsTable) {
  static char heaps[8][64];
  ll::Team t{};
  t.rank = 10;
  t.num_ranks = 20;
  t.local_first = 8;
  t.heap_bytes = 64;
  for (int i = 0; i < 8; ++i) t.heap_base[i] = i == 5 ? nullptr : heaps[i];  // rank 13 not mapped
  EXPECT_EQ(ll::heap_base_of(t, 7), nullptr);
  EXPECT_EQ(ll::heap_base_of(t, 16), nullptr);
  EXPECT_EQ(ll::heap_base_of(t, 13), nullptr);
  EXPECT_EQ(ll::heap_base_of(t, 8), heaps[0]);
  EXPECT_EQ(ll::heap_base_of(t, 15), heaps[7]);
  EXPECT_EQ(ll::symm_at(t, heaps[2] + 24, 15), heaps[7] + 24);
  EXPECT_EQ(ll::owner_of(t, heaps[7] + 63), 15);
  EXPECT_EQ(ll::owner_of(t, heaps[2]), 10);
  EXPECT_EQ(ll::owner_of(t, heaps[5] + 1), -1);  // an unmapped entry owns nothing
}

}  // namespace
}  // namespace tilelink
