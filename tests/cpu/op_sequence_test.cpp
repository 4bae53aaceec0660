// Epochs: one per op call, starting at 1, only growing; the op name is kept for error messages.
#include <gtest/gtest.h>

#include "tilelink/runtime/op_sequence.hpp"

namespace tilelink {
namespace {

TEST(OpSequence, StartsBeforeTheFirstCall) {
  OpSequence s;
  EXPECT_EQ(s.epoch(), 0u);
  EXPECT_EQ(s.op(), "(none)");
}

TEST(OpSequence, EachCallGetsTheNextEpoch) {
  OpSequence s;
  EXPECT_EQ(s.begin("ag_gemm"), 1u) << "epoch 1 first: a zeroed signal must not satisfy a wait";
  EXPECT_EQ(s.op(), "ag_gemm");
  EXPECT_EQ(s.begin("gemm_rs"), 2u);
  EXPECT_EQ(s.epoch(), 2u);
  EXPECT_EQ(s.op(), "gemm_rs");
  uint64_t last = s.epoch();
  for (int i = 0; i < 100000; ++i) {
    const uint64_t e = s.begin("loop");
    ASSERT_EQ(e, last + 1);
    last = e;
  }
}

TEST(OpSequence, UnnamedCallsAreStillNamed) {
  OpSequence s;
  s.begin(nullptr);
  EXPECT_EQ(s.op(), "(unnamed op)");
  s.begin("");
  EXPECT_EQ(s.op(), "(unnamed op)");
}

TEST(OpSequence, RanksMakingTheSameCallsAgree) {
  OpSequence a, b;
  for (const char* op : {"x", "y", "z", "x"}) EXPECT_EQ(a.begin(op), b.begin(op));
}

}  // namespace
}  // namespace tilelink
