// The fields of one line of text between separators, and its integers (private to the engine's
// text forms: plan text, tuned-plans files). Empty fields are kept: "a,,b" has three, "" one.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace tilelink::gemm::detail {

inline std::vector<std::string> split_fields(const std::string& text, char sep) {
  std::vector<std::string> fields(1);
  for (char c : text) {
    if (c == sep) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// The whole of `text` as a decimal integer in [lo, hi] (no sign, space or trailing characters).
inline bool whole_integer(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty() || text.size() > 18 || text[0] < '0' || text[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace tilelink::gemm::detail
