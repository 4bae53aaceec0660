// src/ops/common/rank_split.hpp — whether a decomposed call of ag_gemm or gemm_rs splits its GEMM
// by rank (tilelink/ops/path.hpp, RankSplit), the same answer on every rank.
#pragma once

#include "tilelink/core/error.hpp"
#include "tilelink/ops/path.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink::ops {

// `pays`: the op's rule for this shape and topology (ops::*_split_decomposed), computed from
// what every rank agrees on. RankSplit::split where it cannot run throws before anything is
// launched (every rank the same way).
inline bool split_by_rank(const Context& ctx, RankSplit asked, bool pays, const char* op) {
  if (ctx.num_ranks() == 1 || asked == RankSplit::whole) return false;
  if (asked == RankSplit::automatic) return pays && !ctx.capturing();
  TL_REQUIRE(ctx.peers_load_store(), op,
             ": split=split moves rows between load/store peers with the copy engine; this world reaches its "
             "peers through NVSHMEM put-with-signal (another node, or one node per process)");
  ctx.refuse_in_capture("split its GEMM by rank (split=split; copies between GPUs in a graph stalled replays)");
  return true;
}

}  // namespace tilelink::ops
