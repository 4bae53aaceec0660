// The attention kernel's host checks: what attention_forward and the problem check refuse before
// anything is launched, and how query tiles are counted over segments. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tilelink/attention/attention.hpp"
#include "tilelink/attention/fmha_problem.hpp"

namespace tilelink {
namespace {

// A valid-looking call over fake, aligned device addresses (never dereferenced: every case below
// is refused before launch).
AttentionArgs good_args() {
  AttentionArgs a;
  void* fake = reinterpret_cast<void*>(uintptr_t(1) << 20);
  a.q = a.k = a.v = fake;
  a.out = fake;
  a.batch = 2, a.q_len = 300, a.kv_len = 500, a.q_heads = 8, a.kv_heads = 2, a.head_dim = 128;
  return a;
}

template <class Change>
std::string refusal(Change change) {
  AttentionArgs a = good_args();
  change(a);
  try {
    attention_forward(a, nullptr);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(AttentionArgs, BadArgumentsAreRefusedWithTheirName) {
  struct Case {
    const char* what;
    void (*change)(AttentionArgs&);
    const char* message;
  };
  const Case cases[] = {
      {"head_dim 96", [](AttentionArgs& a) { a.head_dim = 96; }, "head_dim must be 64 or 128"},
      {"q_heads 8, kv_heads 3", [](AttentionArgs& a) { a.kv_heads = 3; }, "must be a multiple of kv_heads"},
      {"null k", [](AttentionArgs& a) { a.k = nullptr; }, "k and v must be device pointers"},
      {"null out", [](AttentionArgs& a) { a.out = nullptr; }, "q and out must be device pointers"},
      {"negative q_len", [](AttentionArgs& a) { a.q_len = -1; }, "must be >= 0"},
      {"batch 0", [](AttentionArgs& a) { a.batch = 0; }, "batch must be in 1 .. 65535"},
      {"row stride 4 elements off", [](AttentionArgs& a) { a.q_stride = {300 * 8 * 128, 8 * 128 + 4, 128}; },
       "q strides"},
      {"zero head stride with others set", [](AttentionArgs& a) { a.k_stride = {500 * 2 * 128, 2 * 128, 0}; },
       "k strides"},
      {"v misaligned", [](AttentionArgs& a) { a.v = static_cast<const char*>(a.v) + 2; }, "16-byte aligned"},
      {"lse misaligned", [](AttentionArgs& a) { a.lse = reinterpret_cast<float*>(uintptr_t(1) << 20 | 2); },
       "lse must be 4-byte aligned"},
      {"NaN scale", [](AttentionArgs& a) { a.scale = NAN; }, "scale must be finite"},
      {"negative scale", [](AttentionArgs& a) { a.scale = -1.0f; }, "scale must be finite"},
      {"unknown dtype", [](AttentionArgs& a) { a.dtype = DType(7); }, "unsupported dtype"},
  };
  for (const Case& c : cases) {
    const std::string got = refusal(c.change);
    EXPECT_NE(got.find("attention_forward"), std::string::npos) << c.what << ": " << got;
    EXPECT_NE(got.find(c.message), std::string::npos) << c.what << ": " << got;
  }
}

attention::FmhaProblem zigzag_problem(int ranks, int64_t chunk) {
  attention::FmhaProblem p;
  p.q = p.k = p.v = p.o = reinterpret_cast<void*>(uintptr_t(1) << 20);
  p.batch = 1, p.q_rows = 2 * chunk, p.kv_rows = 2 * chunk * ranks, p.q_heads = 4, p.kv_heads = 4, p.head_dim = 64;
  for (auto* s : {&p.q_stride, &p.k_stride, &p.v_stride, &p.o_stride}) (*s)[0] = 1 << 20, (*s)[1] = 256, (*s)[2] = 64;
  p.causal = true;
  p.scale = 0.125f;
  p.q_segments = 2;
  p.q_segment[0] = {0, chunk, 0};
  p.q_segment[1] = {chunk, chunk, (2 * ranks - 1) * chunk};
  p.kv_segments = 2 * ranks;
  for (int s = 0; s < ranks; ++s) {
    p.kv_segment[2 * s] = {2 * s * chunk, chunk, s * chunk};
    p.kv_segment[2 * s + 1] = {(2 * s + 1) * chunk, chunk, (2 * ranks - 1 - s) * chunk};
  }
  return p;
}

TEST(AttentionProblem, SegmentsMustLieInsideTheirTensors) {
  EXPECT_NO_THROW(attention::check_problem(zigzag_problem(8, 100), "test"));
  auto p = zigzag_problem(2, 100);
  p.kv_segment[3].rows = 101;  // runs one row past the keys
  EXPECT_THROW(attention::check_problem(p, "test"), Error);
  p = zigzag_problem(2, 100);
  p.q_segment[1].row = -1;
  EXPECT_THROW(attention::check_problem(p, "test"), Error);
  p = zigzag_problem(2, 100);
  p.kv_segments = attention::kMaxKvSegments + 1;
  EXPECT_THROW(attention::check_problem(p, "test"), Error);
  p = zigzag_problem(2, 100);
  p.q_segments = 3;
  EXPECT_THROW(attention::check_problem(p, "test"), Error);
}

TEST(AttentionProblem, QueryTilesAreCountedPerSegment) {
  // Each segment's rows are tiled on their own: 100 + 100 rows are 2 tiles, not 1 of 200.
  EXPECT_EQ(attention::query_tiles(zigzag_problem(2, 100)), 2);
  EXPECT_EQ(attention::query_tiles(zigzag_problem(2, 129)), 4);
  EXPECT_EQ(attention::query_tiles(zigzag_problem(2, 128)), 2);
  auto p = zigzag_problem(2, 0);
  EXPECT_EQ(attention::query_tiles(p), 0);
}

TEST(AttentionSplits, ManyItemsOrShortKeysAreNotSplit) {
  EXPECT_EQ(attention::kv_splits_for(132, 1000, 132, false), 1);   // one full wave
  EXPECT_EQ(attention::kv_splits_for(5000, 1000, 132, false), 1);  // 38 waves: a split gains < 5%
  EXPECT_EQ(attention::kv_splits_for(4, 2 * attention::kMinKvTilesPerSplit - 1, 132, false), 1);
  EXPECT_EQ(attention::kv_splits_for(0, 1000, 132, false), 1);
  EXPECT_EQ(attention::kv_splits_for(150, 1000, 132, true), 1);  // causal: longest first fills the tail
}

TEST(AttentionSplits, FewItemsWithLongKeysAreSplitToFillTheWaves) {
  // 18 items on 132 SMs: 7 splits make 126 units, one wave of 1/7 the length; more splits gain
  // under 5% (the least cost is 4 waves of 1/29).
  EXPECT_EQ(attention::kv_splits_for(18, 123, 132, false), 7);
  EXPECT_EQ(attention::kv_splits_for(18, 123, 132, true), 7);
  // One item: about as many splits as allowed, capped by the keys (8 tiles per split) and the
  // maximum (31 of 32: within 5% of the best).
  EXPECT_EQ(attention::kv_splits_for(1, 40, 132, false), 5);
  EXPECT_EQ(attention::kv_splits_for(1, 100000, 132, false), attention::kMaxKvSplits - 1);
  // 100 items: 2 .. 4 splits gain nothing (4 waves of 1/4 is one wave's time); 5, the most the
  // workspace bound allows, makes 4 waves of 1/5.
  EXPECT_EQ(attention::kv_splits_for(100, 1000, 132, false), 5);
  // 150 equal items: 2 waves, the second nearly empty; 3 splits make 4 waves of 1/3.
  EXPECT_EQ(attention::kv_splits_for(150, 1000, 132, false), 3);
}

TEST(AttentionSplits, TheChoiceIsWithinFivePercentOfTheBestAndNeverSlowerThanNoSplit) {
  auto cost = [](int64_t work, int64_t s, int sms) { return double((work * s + sms - 1) / sms) / double(s); };
  for (int sms : {78, 114, 132}) {
    for (int64_t work = 1; work < 6 * sms; work += 7) {
      for (int64_t tiles : {1, 7, 8, 33, 250, 4096}) {
        for (bool causal : {false, true}) {
          const int s = attention::kv_splits_for(work, tiles, sms, causal);
          ASSERT_GE(s, 1);
          if (causal && work >= sms) ASSERT_EQ(s, 1);
          if (s == 1) continue;
          ASSERT_LE(s, attention::kMaxKvSplits);
          ASSERT_GE(tiles / s, attention::kMinKvTilesPerSplit) << work << " " << tiles << " " << sms;
          ASSERT_LE(work * s, int64_t(attention::kMaxUnitsPerSm) * sms);
          ASSERT_LT(cost(work, s, sms), cost(work, 1, sms)) << work << " " << tiles << " " << sms;
          const int64_t most = std::min<int64_t>({attention::kMaxKvSplits, tiles / attention::kMinKvTilesPerSplit,
                                                  attention::kMaxUnitsPerSm * sms / work});
          for (int64_t t = 2; t <= most; ++t) ASSERT_LE(cost(work, s, sms), 1.05 * cost(work, t, sms));
        }
      }
    }
  }
}

}  // namespace
}  // namespace tilelink
