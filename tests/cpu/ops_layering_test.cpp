// The ops are built on the tile layer: no op names a low-level primitive (ll::) for cross-rank
// work, or includes an ll/ header other than team.cuh (the Team type every kernel receives).
// And the layers below the ops never include an op header: what they share with the ops (DType,
// Error) lives in core/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

// ll:: names an op may use: the Team passed to its kernels and the most ranks it can hold.
const std::set<std::string> kAllowedNames = {"Team", "kMaxLocalRanks", "kMaxWorldRanks"};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What in `text` breaks the rule, one line per finding.
std::string violations(const std::string& text) {
  std::string found;
  static const std::regex include(R"(#include\s+"tilelink/ll/([a-z_]+\.cuh)\")");
  for (std::sregex_iterator it(text.begin(), text.end(), include), end; it != end; ++it)
    if ((*it)[1] != "team.cuh") found += "  includes tilelink/ll/" + (*it)[1].str() + "\n";
  static const std::regex name(R"(\bll::([A-Za-z_][A-Za-z_0-9]*))");
  std::set<std::string> names;
  for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it)
    if (!kAllowedNames.count((*it)[1])) names.insert((*it)[1]);
  for (const auto& n : names) found += "  uses ll::" + n + "\n";
  return found;
}

TEST(OpsLayering, OpsUseTilePrimitivesNotLowLevelOnes) {
  const fs::path root = TILELINK_SOURCE_DIR;
  int files = 0;
  for (const char* dir : {"src/ops", "include/tilelink/ops"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".cu" && ext != ".cuh" && ext != ".hpp" && ext != ".cpp" && ext != ".h") continue;
      ++files;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      const std::string found = violations(read(entry.path()));
      if (found.empty()) continue;
      ADD_FAILURE() << rel << " reaches below the tile layer:\n"
                    << found << "use the tile:: primitives (include/tilelink/tile/), or add one there";
    }
  }
  EXPECT_GT(files, 20) << "no op sources found under " << root;
}

// Every source file under `dir` (relative to the source root) that includes a tilelink/ops/ header.
std::string op_includes_under(const char* dir) {
  static const std::regex include(R"(#include\s+"tilelink/ops/[^"]+")");
  std::string found;
  const fs::path root = TILELINK_SOURCE_DIR;
  for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string text = read(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), include), end; it != end; ++it)
      found += "  " + fs::relative(entry.path(), root).generic_string() + ": " + it->str() + "\n";
  }
  return found;
}

TEST(OpsLayering, LayersBelowTheOpsIncludeNoOpHeader) {
  for (const char* dir : {"include/tilelink/core", "include/tilelink/ll", "include/tilelink/tile",
                          "include/tilelink/gemm", "include/tilelink/runtime", "src/gemm", "src/runtime"})
    EXPECT_EQ(op_includes_under(dir), "") << dir << " reaches up into the ops";
}

TEST(OpsLayering, TheCheckSeesWhatItLooksFor) {
  EXPECT_EQ(violations("#include \"tilelink/ll/team.cuh\"\nll::Team t; ll::kMaxLocalRanks;"), "");
  EXPECT_NE(violations("#include \"tilelink/ll/signal.cuh\""), "");
  EXPECT_NE(violations("ll::signal_wait_until(t, p, ll::Cmp::ge, 1);"), "");
}

}  // namespace
