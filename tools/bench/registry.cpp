// Argument parsing and the command table of tilelink-bench.
#include "bench/registry.hpp"

#include <cerrno>
#include <cstdlib>

#include "tilelink/core/error.hpp"

namespace tilelink::bench {

namespace {
std::string flag_name(const std::string& flag) {
  size_t i = 0;
  while (i < flag.size() && i < 2 && flag[i] == '-') ++i;
  return flag.substr(i);
}
}  // namespace

// argv[0] is the program or command name and is skipped. "--flag value" takes the next word as
// the value unless it starts with "--"; "--flag=value" always does; a lone "--flag" is a switch
// (its value is ""); other words are positional, in order.
Args::Args(int argc, char** argv) : argc_(argc), argv_(argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.size() > 2 && word.compare(0, 2, "--") == 0) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) {
        flags_[word.substr(2, eq - 2)] = word.substr(eq + 1);
      } else if (i + 1 < argc && std::string(argv[i + 1]).compare(0, 2, "--") != 0) {
        flags_[word.substr(2)] = argv[++i];
      } else {
        flags_[word.substr(2)] = "";
      }
    } else {
      positional_.push_back(word);
    }
  }
}

bool Args::has(const std::string& flag) const { return flags_.count(flag_name(flag)) != 0; }

std::string Args::get(const std::string& flag, const std::string& fallback) const {
  auto it = flags_.find(flag_name(flag));
  return it == flags_.end() ? fallback : it->second;
}

long Args::get_int(const std::string& flag, long fallback) const {
  auto it = flags_.find(flag_name(flag));
  if (it == flags_.end()) return fallback;
  const std::string& text = it->second;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 0);
  TL_REQUIRE(!text.empty() && *end == '\0' && errno != ERANGE, "tilelink-bench: --",
             flag_name(flag), " expects an integer, got '", text, "'");
  return v;
}

double Args::get_double(const std::string& flag, double fallback) const {
  auto it = flags_.find(flag_name(flag));
  if (it == flags_.end()) return fallback;
  const std::string& text = it->second;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  TL_REQUIRE(!text.empty() && *end == '\0' && errno != ERANGE, "tilelink-bench: --",
             flag_name(flag), " expects a number, got '", text, "'");
  return v;
}

std::map<std::string, Command>& registry() {
  static std::map<std::string, Command> commands;  // filled by static Registrars, before main
  return commands;
}

}  // namespace tilelink::bench
