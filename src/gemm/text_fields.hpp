// The fields of one line of text between separators (private to the engine's text forms: plan
// text, tuned-plans files). Empty fields are kept: "a,,b" has three, "" one.
#pragma once

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

}  // namespace tilelink::gemm::detail
