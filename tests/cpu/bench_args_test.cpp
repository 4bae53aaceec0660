// tilelink-bench's argument parsing.
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "bench/registry.hpp"
#include "tilelink/core/error.hpp"

namespace tilelink::bench {
namespace {

Args parse(std::vector<std::string> words) {
  // argv must outlive the Args; a deque never moves what it already holds.
  static std::deque<std::vector<std::string>> keep;
  keep.push_back(std::move(words));
  static std::deque<std::vector<char*>> pointers;
  std::vector<char*> argv;
  for (auto& w : keep.back()) argv.push_back(w.data());
  pointers.push_back(argv);
  return Args(int(pointers.back().size()), pointers.back().data());
}

TEST(BenchArgs, FlagsValuesSwitchesAndPositionals) {
  const Args a = parse({"primitives", "--ranks", "4", "--mpi", "--csv=out.csv", "extra", "--iters",
                        "-3", "--quiet"});
  EXPECT_EQ(a.get_int("ranks", 0), 4);
  EXPECT_EQ(a.get_int("--ranks", 0), 4) << "the leading dashes are optional";
  EXPECT_TRUE(a.has("mpi"));
  EXPECT_EQ(a.get("mpi", "x"), "");
  EXPECT_EQ(a.get("csv", ""), "out.csv");
  EXPECT_EQ(a.get_int("iters", 0), -3) << "a negative number is a value, not a flag";
  EXPECT_TRUE(a.has("quiet"));
  ASSERT_EQ(a.positional().size(), 1u);
  EXPECT_EQ(a.positional()[0], "extra");
  EXPECT_EQ(a.argc(), 9);
}

TEST(BenchArgs, FallbacksWhenAbsent) {
  const Args a = parse({"cmd"});
  EXPECT_FALSE(a.has("ranks"));
  EXPECT_EQ(a.get_int("ranks", 8), 8);
  EXPECT_EQ(a.get_double("bw", 1.5), 1.5);
  EXPECT_EQ(a.get("csv", "none"), "none");
  EXPECT_TRUE(a.positional().empty());
}

TEST(BenchArgs, NumbersAreChecked) {
  const Args a = parse({"cmd", "--ranks", "four", "--size", "1.5", "--scale", "2x", "--hex", "0x10"});
  EXPECT_THROW(a.get_int("ranks", 0), Error);
  EXPECT_THROW(a.get_int("size", 0), Error);
  EXPECT_DOUBLE_EQ(a.get_double("size", 0), 1.5);
  EXPECT_THROW(a.get_double("scale", 0), Error);
  EXPECT_EQ(a.get_int("hex", 0), 16);
  try {
    a.get_int("ranks", 0);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "tilelink-bench: --ranks expects an integer, got 'four'");
  }
  const Args empty = parse({"cmd", "--iters"});
  EXPECT_THROW(empty.get_int("iters", 1), Error) << "a switch has no number";
}

TEST(BenchArgs, RegistryHoldsRegisteredCommands) {
  Registrar r("zz_test_command", "a test", [](const Args&) { return 7; });
  ASSERT_EQ(registry().count("zz_test_command"), 1u);
  EXPECT_EQ(registry().at("zz_test_command").help, "a test");
  EXPECT_EQ(registry().at("zz_test_command").run(parse({"zz_test_command"})), 7);
  registry().erase("zz_test_command");
}

}  // namespace
}  // namespace tilelink::bench
