// World arguments that are rejected before any CUDA call, so this runs without a GPU.
#include <gtest/gtest.h>

#include "tilelink/runtime/world.hpp"

namespace tilelink {
namespace {

std::string error_of(int ranks) {
  try {
    InProcessWorld world(ranks);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(InProcessWorld, RankCountOutsideOneToMaxIsAnError) {
  for (int n : {0, -1, ll::kMaxLocalRanks + 1, 1000}) {
    const std::string msg = error_of(n);
    EXPECT_NE(msg.find("InProcessWorld: " + std::to_string(n) + " ranks requested"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("1 to " + std::to_string(ll::kMaxLocalRanks) + " ranks"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace tilelink
