// src/ops/common/uniform_check.hpp — check once per distinct call shape that all ranks agree.
//
// A cross-rank check is a host collective (a barrier), too slow for every call. Ops therefore
// check a call's signature (named integers: shape, dtype, options) collectively the first time
// this context sees it, and remember it. Every rank makes the same calls in the same order, so
// they all take the collective path at the same calls; a rank whose call differs makes the
// collective on a call the others skip, and the host barrier's bound turns that into an error
// instead of a hang.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <utility>
#include <vector>

#include "tilelink/runtime/context.hpp"
#include "tilelink/runtime/error.hpp"

namespace tilelink::ops {

class UniformCheck {
 public:
  using Field = std::pair<const char*, int64_t>;

  void require(Context& ctx, const char* op, std::initializer_list<Field> fields) {
    std::vector<int64_t> mine;
    for (const auto& f : fields) mine.push_back(f.second);
    for (const auto& s : seen_)
      if (s == mine) return;
    const size_t n = mine.size();
    std::vector<int64_t> all(n * ctx.num_ranks());
    ctx.allgather(mine.data(), all.data(), n * sizeof(int64_t));
    for (int r = 0; r < ctx.num_ranks(); ++r) {
      size_t i = 0;
      for (const auto& f : fields) {
        if (all[r * n + i] != mine[i])
          ::tilelink::detail::fail(op, ": ", f.first, " differs across ranks: rank ", ctx.rank(), " has ",
                       mine[i], ", rank ", r, " has ", all[r * n + i]);
        ++i;
      }
    }
    seen_.push_back(std::move(mine));
  }

 private:
  std::vector<std::vector<int64_t>> seen_;
};

}  // namespace tilelink::ops
