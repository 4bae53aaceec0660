// The symmetric heap's bookkeeping: pool carving, alignment, exhaustion, workspaces.
#include <gtest/gtest.h>

#include <cstdint>

#include "tilelink/core/error.hpp"
#include "tilelink/runtime/heap_layout.hpp"

namespace tilelink {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HeapLayout, DataStartsAfterThePoolOnAnAlignedOffset) {
  EXPECT_EQ(HeapLayout(kMiB, 128).data_begin(), 1024u);  // 128 slots = exactly 1 KiB
  EXPECT_EQ(HeapLayout(kMiB, 129).data_begin(), 2048u);
  EXPECT_EQ(HeapLayout(kMiB, 1).data_begin(), 1024u);
  HeapLayout h(64 * kMiB, 65536);
  EXPECT_EQ(h.pool_bytes(), 512 * 1024u);
  EXPECT_EQ(h.data_begin(), 512 * 1024u);
  EXPECT_EQ(h.used_bytes(), h.data_begin());
  EXPECT_EQ(h.free_bytes(), 64 * kMiB - 512 * 1024);
}

TEST(HeapLayout, BlocksAreAlignedAndDoNotOverlap) {
  HeapLayout h(kMiB, 128);
  EXPECT_EQ(h.allocate(1, "a"), 1024u);
  EXPECT_EQ(h.allocate(1025, "b"), 2048u);
  EXPECT_EQ(h.allocate(1024, "c"), 4096u);
  EXPECT_EQ(h.allocate(7, "d"), 5120u);
  EXPECT_EQ(h.used_bytes(), 6144u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(h.allocate(100 + i * 37, "x") % HeapLayout::kAlignment, 0u);
}

TEST(HeapLayout, ZeroBytesStillGetsABlockOfItsOwn) {
  HeapLayout h(kMiB, 128);
  const size_t a = h.allocate(0, "empty");
  const size_t b = h.allocate(0, "empty too");
  EXPECT_NE(a, b);
}

TEST(HeapLayout, ExhaustionNamesTheRequestTheFreeSpaceAndTheKnob) {
  HeapLayout h(4 * kMiB, 128);
  h.allocate(3 * kMiB, "big");
  const size_t used = h.used_bytes();
  const std::string msg = error_of([&] { h.allocate(2 * kMiB, "ag_gemm.A"); });
  EXPECT_NE(msg.find("'ag_gemm.A'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2.00 MiB (2097152 bytes)"), std::string::npos) << msg;       // requested
  EXPECT_NE(msg.find(std::to_string(h.free_bytes()) + " bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4.00 MiB"), std::string::npos) << msg;                         // heap size
  EXPECT_NE(msg.find("TILELINK_HEAP_MB"), std::string::npos) << msg;
  EXPECT_EQ(h.used_bytes(), used) << "a failed request must not move the bump pointer";
}

TEST(HeapLayout, FillsExactlyToTheEnd) {
  HeapLayout h(8 * 1024, 128);  // data: [1024, 8192)
  EXPECT_EQ(h.allocate(7 * 1024, "all"), 1024u);
  EXPECT_EQ(h.free_bytes(), 0u);
  EXPECT_NE(error_of([&] { h.allocate(1, "one more"); }).find("exhausted"), std::string::npos);
}

TEST(HeapLayout, HugeRequestsDoNotOverflow) {
  HeapLayout h(kMiB, 128);
  EXPECT_NE(error_of([&] { h.allocate(SIZE_MAX, "huge"); }).find("exhausted"), std::string::npos);
  EXPECT_NE(error_of([&] { h.allocate(SIZE_MAX - 100, "huge"); }).find("exhausted"),
            std::string::npos);
  EXPECT_EQ(h.allocate(1, "after"), 1024u);
}

TEST(HeapLayout, PoolThatDoesNotFitIsRejected) {
  EXPECT_NE(error_of([] { HeapLayout(4096, 1024); }).find("does not fit"), std::string::npos);
  EXPECT_NE(error_of([] { HeapLayout(1024, 128); }).find("no room for data"), std::string::npos);
  EXPECT_NE(error_of([] { HeapLayout(kMiB, 0); }).find("at least one slot"), std::string::npos);
}

TEST(HeapLayout, SignalSlotsAreCarvedInOrderAndNeverTwice) {
  HeapLayout h(kMiB, 100);
  EXPECT_EQ(h.allocate_signals(8, "barrier"), 0u);
  EXPECT_EQ(h.allocate_signals(1, "a"), 8u);
  EXPECT_EQ(h.allocate_signals(90, "b"), 9u);
  EXPECT_EQ(h.free_slots(), 1u);
  const std::string msg = error_of([&] { h.allocate_signals(2, "tile flags"); });
  EXPECT_NE(msg.find("'tile flags'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("requested 2 slots but only 1 of 100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TILELINK_SIGNAL_SLOTS"), std::string::npos) << msg;
  EXPECT_EQ(h.allocate_signals(1, "last"), 99u);
  EXPECT_NE(error_of([&] { h.allocate_signals(0, "none"); }).find("0 signal slots"),
            std::string::npos);
  EXPECT_EQ(h.used_bytes(), h.data_begin()) << "signals do not consume data space";
}

TEST(HeapLayout, WorkspaceIsCachedUntilALargerSizeIsAsked) {
  HeapLayout h(kMiB, 128);
  EXPECT_FALSE(h.find_workspace("ws", 1));
  const size_t a = h.grow_workspace("ws", 4096);
  EXPECT_EQ(h.find_workspace("ws", 4096), a);
  EXPECT_EQ(h.find_workspace("ws", 100), a);
  EXPECT_FALSE(h.find_workspace("ws", 4097));
  EXPECT_FALSE(h.find_workspace("other", 1));
}

TEST(HeapLayout, NewestWorkspaceGrowsInPlace) {
  HeapLayout h(kMiB, 128);
  h.allocate(100, "before");
  const size_t a = h.grow_workspace("ws", 1024);
  EXPECT_EQ(h.grow_workspace("ws", 10 * 1024), a);
  EXPECT_EQ(h.used_bytes(), a + 10 * 1024);
  EXPECT_EQ(h.find_workspace("ws", 10 * 1024), a);
}

TEST(HeapLayout, OlderWorkspaceIsRecarvedAboveTheNewestBlock) {
  HeapLayout h(kMiB, 128);
  const size_t a = h.grow_workspace("ws", 1024);
  const size_t b = h.allocate(1024, "later");
  const size_t c = h.grow_workspace("ws", 2048);
  EXPECT_NE(c, a);
  EXPECT_GT(c, b);
  EXPECT_EQ(h.find_workspace("ws", 2048), c);
  EXPECT_EQ(h.allocate(1, "next"), c + 2048) << "the re-carved block is now the newest";
}

TEST(HeapLayout, FailedGrowthKeepsTheOldWorkspace) {
  HeapLayout h(16 * 1024, 128);  // 15 KiB of data
  const size_t a = h.grow_workspace("ws", 4096);
  const size_t used = h.used_bytes();
  const std::string msg = error_of([&] { h.grow_workspace("ws", 64 * 1024); });
  EXPECT_NE(msg.find("workspace 'ws'"), std::string::npos) << msg;
  EXPECT_EQ(h.used_bytes(), used);
  EXPECT_EQ(h.find_workspace("ws", 4096), a);
  EXPECT_EQ(h.allocate(1024, "still works"), used);
}

TEST(HeapLayout, SignalWorkspaceGrowsInPlaceOrRecarves) {
  HeapLayout h(kMiB, 1000);
  h.allocate_signals(8, "barrier");
  const size_t a = h.grow_signal_workspace("flags", 10);
  EXPECT_EQ(a, 8u);
  EXPECT_EQ(h.find_signal_workspace("flags", 10), a);
  EXPECT_FALSE(h.find_signal_workspace("flags", 11));
  EXPECT_EQ(h.grow_signal_workspace("flags", 20), a);  // newest: in place
  EXPECT_EQ(h.used_slots(), 28u);
  h.allocate_signals(2, "other");
  const size_t b = h.grow_signal_workspace("flags", 30);  // no longer newest: fresh slots
  EXPECT_EQ(b, 30u);
  EXPECT_EQ(h.used_slots(), 60u);
  const std::string msg = error_of([&] { h.grow_signal_workspace("flags", 5000); });
  EXPECT_NE(msg.find("signal workspace 'flags'"), std::string::npos) << msg;
  EXPECT_EQ(h.used_slots(), 60u);
  EXPECT_EQ(h.find_signal_workspace("flags", 30), b);
}

TEST(HeapLayout, ContainsChecksBothEnds) {
  HeapLayout h(kMiB, 128);
  EXPECT_TRUE(h.contains(0, kMiB));
  EXPECT_TRUE(h.contains(kMiB - 1, 1));
  EXPECT_FALSE(h.contains(kMiB - 1, 2));
  EXPECT_FALSE(h.contains(kMiB + 1, 0));
  EXPECT_FALSE(h.contains(10, SIZE_MAX));
}

TEST(FormatBytes, ReadableAndExact) {
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB (1536 bytes)");
  EXPECT_EQ(format_bytes(size_t(2048) << 20), "2.00 GiB (2147483648 bytes)");
}

}  // namespace
}  // namespace tilelink
