// src/ops/common/uniform_check.hpp — agree across ranks, once per distinct call shape.
//
// Every rank must derive the same plan for a call (tile shapes, chunk layouts, SM counts): ranks
// exchange signals by slot numbers that come from that plan. So an op states its call's
// signature as named integers in two groups:
//   * `equal` — must be the same on every rank (M, dtype, options); a rank that differs gets an
//     error naming the field, on every rank;
//   * `agreed` — may differ between ranks (a rank's own N or K shard) but shapes the plan; the
//     op gets back the maximum over the ranks and plans with that, so all ranks plan alike.
// A cross-rank check is a host collective, too slow for every call, so a signature is exchanged
// the first time this context sees it and remembered. Every rank makes the same calls in the same
// order, so they all take the collective path at the same calls; a rank whose call differs makes
// the collective on a call the others skip, and the host barrier's bound turns that into an error
// instead of a hang.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "tilelink/runtime/context.hpp"
#include "tilelink/core/error.hpp"

namespace tilelink::ops {

class UniformCheck {
 public:
  using Field = std::pair<const char*, int64_t>;

  // Returns, in the order given, the maximum over the ranks of each `agreed` field (valid until
  // the next call: read it at once). Cached calls allocate nothing beyond the signature.
  const std::vector<int64_t>& require(Context& ctx, const char* op, std::initializer_list<Field> equal,
                                      std::initializer_list<Field> agreed = {}) {
    std::vector<int64_t> mine;
    for (const auto& f : equal) mine.push_back(f.second);
    for (const auto& f : agreed) mine.push_back(f.second);
    for (const auto& s : seen_)
      if (s.signature == mine) return s.agreed;
    const size_t n = mine.size(), w = size_t(ctx.num_ranks());
    std::vector<int64_t> all(n * w);
    ctx.allgather(mine.data(), all.data(), n * sizeof(int64_t));
    size_t i = 0;
    for (const auto& f : equal) {
      for (size_t r = 0; r < w; ++r)
        if (all[r * n + i] != mine[i])
          ::tilelink::detail::fail(op, ": ", f.first, " differs across ranks: rank ", ctx.rank(), " has ", mine[i],
                                   ", rank ", r, " has ", all[r * n + i]);
      ++i;
    }
    std::vector<int64_t> maxima;
    for (; i < n; ++i) {
      int64_t m = mine[i];
      for (size_t r = 0; r < w; ++r) m = std::max(m, all[r * n + i]);
      maxima.push_back(m);
    }
    seen_.push_back({std::move(mine), std::move(maxima)});
    return seen_.back().agreed;
  }

 private:
  struct Seen {
    std::vector<int64_t> signature;
    std::vector<int64_t> agreed;
  };
  std::vector<Seen> seen_;
};

}  // namespace tilelink::ops
