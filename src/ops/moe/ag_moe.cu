// src/ops/moe/ag_moe.cu — AllGather + grouped GEMM (mixture-of-experts, tensor parallel).
//
// Per call on rank r (world W), after begin_op advanced the epoch on the device:
//   caller's stream: the routing tables (routing.hpp) from topk_ids
//   side stream (forked after them):
//     wait until every peer finished reading r's staging of the previous call ("done")
//     copy r's tokens into its symmetric staging buffer, tell every peer "ready"
//     gather kernel: for chunk c = 0 .. W-1 (tokens of rank r+c), copy each sorted row's token
//     from that rank's staging (own rows first, no wait), publishing each block's share; with
//     top-k > 1 a peer's tokens are pulled once into a local copy first and sorted from there
//     tell every peer "done"
//   caller's stream: the grouped GEMM over groups (chunk, expert); each tile waits for the
//     chunk its group reads; then (unless the caller wants the sorted layout) the rows back to
//     token order. Join.
// Peers reached only through NVSHMEM put-with-signal: nobody reads a peer's memory. r's tokens go
// into its own rows of its symmetric gathered copy, r says "ready", pushes them chunk by chunk
// into every ready peer's copy (ag_gemm's gather over NVSHMEM), and the gather kernel waits for
// each peer's chunks in r's copy instead of pulling them.
// Decomposed: NCCL all-gathers the tokens, then the same gather kernel (local, no waits), the
// grouped GEMM and the unsort, in stream order. One rank: no staging, no side stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "ops/ag_gemm/gather_nvshmem.hpp"
#include "ops/common/op_call.hpp"
#include "ops/common/rules.hpp"
#include "ops/common/side_stream.hpp"
#include "ops/common/uniform_check.hpp"
#include "ops/moe/moe_kernels.cuh"
#include "ops/moe/routing.hpp"
#include "ops/moe/run_grouped.hpp"
#include "tilelink/gemm/grouped.hpp"
#include "tilelink/ops/ag_gemm/gather_kernel.cuh"
#include "tilelink/ops/moe/ag_moe.hpp"
#include "tilelink/runtime/nccl.hpp"
#include "tilelink/tile.cuh"
#include "tilelink/tile/rank_copy.hpp"

namespace tilelink {
namespace {

constexpr const char* kOp = "ag_moe";

struct AgMoeState {
  explicit AgMoeState(Context& ctx) : side(ctx) {}
  ops::SideStream side;
  ops::UniformCheck uniform;
  ops::MoeRoutingErrors bad_ids;
  bool pull_used = false;
  const void* last_workspace = nullptr;
};

constexpr const char* kBadIdEffect = "their output rows were set to NaN";

void validate_local(const Context& ctx, const AgMoeArgs& a, const AgMoeOptions& o) {
  TL_REQUIRE(a.dtype == DType::bf16 || a.dtype == DType::fp16, kOp, ": unsupported dtype");
  TL_REQUIRE(a.x && a.topk_ids && a.w && a.y, kOp, ": x, topk_ids, w and y must be device pointers (rank ",
             ctx.rank(), ")");
  TL_REQUIRE(a.m_per_rank > 0 && a.hidden > 0 && a.n > 0, kOp, ": m_per_rank, hidden and n must be positive (got ",
             a.m_per_rank, ", ", a.hidden, ", ", a.n, ")");
  TL_REQUIRE(a.num_experts > 0, kOp, ": num_experts must be positive (got ", a.num_experts, ")");
  TL_REQUIRE(a.topk >= 1 && a.topk <= a.num_experts, kOp, ": topk=", a.topk, " must be in [1, num_experts=",
             a.num_experts, "]");
  TL_REQUIRE(a.hidden % 8 == 0 && a.n % 8 == 0, kOp, ": hidden=", a.hidden, " and n=", a.n,
             " must be multiples of 8 (16-byte rows)");
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  TL_REQUIRE(aligned(a.x) && aligned(a.w) && aligned(a.y), kOp, ": x, w and y must be 16-byte aligned");
  TL_REQUIRE(reinterpret_cast<uintptr_t>(a.topk_ids) % 4 == 0, kOp, ": topk_ids must be 4-byte aligned");
  const int64_t entries = a.m_per_rank * ctx.num_ranks() * a.topk;
  TL_REQUIRE(entries <= INT32_MAX && int64_t(a.num_experts) * ctx.num_ranks() < (1 << 24), kOp,
             ": too many tokens x topk (", entries, ") or experts");
  TL_REQUIRE(o.comm_sms >= 0 && o.comm_sms < ctx.sm_count(), kOp, ": comm_sms=", o.comm_sms, " must be in [0, ",
             ctx.sm_count(), ")");
  TL_REQUIRE(o.path != OpPath::decomposed || ctx.num_ranks() == 1 || ctx.max_ranks_per_gpu() == 1, kOp,
             ": the decomposed path (NCCL) needs one GPU per rank");
}

void ag_moe_enqueue(Context& ctx, const AgMoeArgs& a, const AgMoeOptions& o, cudaStream_t main) {
  validate_local(ctx, a, o);
  auto& st = ctx.op_state<AgMoeState>(kOp);
  if (!ctx.capturing()) st.bad_ids.raise_new(kOp, kBadIdEffect);
  const int world = ctx.num_ranks(), me = ctx.rank();
  const OpPath path = o.path == OpPath::automatic ? OpPath::fused : o.path;
  st.uniform.require(ctx, kOp,
                     {{"m_per_rank", a.m_per_rank}, {"hidden", a.hidden}, {"n", a.n},
                      {"num_experts", a.num_experts}, {"topk", a.topk}, {"dtype", int64_t(a.dtype)},
                      {"path", int64_t(path)}, {"comm_sms", o.comm_sms}, {"communicate", o.communicate},
                      {"sorted_rows", a.sorted_rows != nullptr}},
                     {});

  const int64_t tokens = a.m_per_rank * world;
  const int64_t entries = tokens * a.topk;
  const int64_t row_bytes = a.hidden * int64_t(dtype_size(a.dtype));
  const int64_t out_row_bytes = a.n * int64_t(dtype_size(a.dtype));
  const bool fused = path == OpPath::fused && world > 1;
  const bool communicate = o.communicate && world > 1;
  const bool shared_gpu = ctx.max_ranks_per_gpu() > 1;
  const int comm_sms = fused ? (o.comm_sms ? o.comm_sms : std::clamp(ctx.sm_count() / 8, 1, 16)) : 1;
  const int gemm_sms = std::max(2, ctx.sm_count() - (fused ? comm_sms + (shared_gpu ? 1 : 0) : 0));

  const ops::MoeRoutingShape rs{tokens, a.m_per_rank, a.topk, a.num_experts, world, me};
  const int32_t groups = rs.groups();
  const gemm::GroupedConfig cfg = gemm::choose_grouped_config(entries, groups, a.n, a.hidden);
  const size_t routing_bytes = ops::moe_routing_workspace_bytes(rs);
  const size_t gemm_bytes = gemm::grouped_gemm_workspace_bytes(cfg, groups, gemm_sms);

  // Buffers: the staging of this rank's tokens (read by the peers), the sorted tokens, the
  // sorted output (unless y takes it), the tables, the GEMM's arguments.
  const bool push_tokens = fused && communicate && !ctx.peers_load_store();  // over NVSHMEM
  char* staging = fused && !push_tokens
                      ? static_cast<char*>(ctx.symmetric_workspace("ag_moe.staging", a.m_per_rank * row_bytes))
                      : nullptr;
  // Every token in token order: what NCCL gathers into (decomposed), the fused gather's local
  // copy of the peers' tokens when each is read by several experts, or where they push them.
  const bool pull_first = fused && communicate && !push_tokens && ops::moe_pull_tokens_first(a.topk);
  char* gathered = (path == OpPath::decomposed && world > 1) || pull_first || push_tokens
                       ? static_cast<char*>(ctx.symmetric_workspace("ag_moe.gathered", tokens * row_bytes))
                       : nullptr;
  char* sorted = static_cast<char*>(ctx.symmetric_workspace("ag_moe.sorted", entries * row_bytes));
  char* y_sorted = a.sorted_rows ? static_cast<char*>(a.y)
                                 : static_cast<char*>(ctx.symmetric_workspace("ag_moe.y_sorted", entries * out_row_bytes));
  void* routing_ws = ctx.symmetric_workspace("ag_moe.routing", routing_bytes);
  void* gemm_ws = ctx.symmetric_workspace("ag_moe.gemm", gemm_bytes);
  const tile::GroupChunkMapping map{a.num_experts, comm_sms, world};
  // The pushes' chunks: enough per rank to keep every push block busy.
  const int32_t push_chunks = std::max(1, (comm_sms + world - 2) / std::max(1, world - 1));
  const auto push_map = tile::RowChunkMapping::make(
      int32_t(a.m_per_rank), int32_t((a.m_per_rank + push_chunks - 1) / push_chunks), world);
  uint64_t* signals = ctx.signal_workspace("ag_moe.signals", 2 * world + 1 + 2 * map.num_tiles() +
                                                                 (push_tokens ? push_map.num_tiles() : 0));
  uint64_t* ready = signals;
  uint64_t* done = signals + world;
  uint64_t* pull_epoch = signals + 2 * world;
  uint64_t* chunk_slots = signals + 2 * world + 1;
  uint64_t* pull_slots = chunk_slots + map.num_tiles();
  uint64_t* push_slots = pull_slots + map.num_tiles();
  if (ops::drain_on_new_slots(ctx, st.side, main, signals, st.last_workspace)) st.pull_used = false;

  ctx.begin_op(kOp, main);
  const ll::Team team = ctx.team();
  const ops::MoeRoutingTables tables =
      ops::enqueue_moe_routing(rs, a.topk_ids, routing_ws, routing_bytes, st.bad_ids.device_counter(), main,
                               a.sorted_rows);

  ops::MoeGatherParams gp{team, map, nullptr, sorted, tables.sorted_entry, tables.group_end, nullptr, a.topk,
                          a.m_per_rank, row_bytes, chunk_slots, ready, true};
  // A gather that runs alone, before the GEMM in stream order: every SM of the rank's share,
  // nobody waits on its slots.
  auto gather_local = [&](const char* source) {
    gp.source = source;
    gp.chunk_slots = nullptr;
    gp.map.producers_per_chunk = ctx.sm_count();
    ops::moe_gather_kernel<<<ctx.sm_count(), ops::kMoeThreads, 0, main>>>(gp);
    TL_CUDA_CHECK(cudaGetLastError());
  };
  if (world == 1 && o.communicate) {
    gather_local(static_cast<const char*>(a.x));
  } else if (!fused && communicate) {
    nccl_check(ncclAllGather(a.x, gathered, size_t(a.m_per_rank * a.hidden), nccl_type(a.dtype), nccl_comm(ctx), main),
               ctx, "ncclAllGather");
    gather_local(gathered);
  } else if (push_tokens) {
    const cudaStream_t side = st.side.get();
    st.side.fork(main);
    char* my_rows = gathered + int64_t(me) * a.m_per_rank * row_bytes;
    tile::rank_copy_data(side, my_rows, a.x, size_t(a.m_per_rank * row_bytes));
    ops::notify_ready(ctx, side, team, ready);
    const ops::AgGatherParams push{team, push_map, gathered, my_rows, row_bytes, push_slots, ready, CommMode::push};
    TL_CUDA_CHECK(ops::launch_ag_gather_nvshmem(push, comm_sms, side));
    gp.source = my_rows;
    gp.from_self = false;
    gp.pulled = gathered;
    gp.pushed_slots = push_slots;
    gp.pushed_map = push_map;
    ops::moe_gather_kernel<<<comm_sms, ops::kMoeThreads, 0, side>>>(gp);
    TL_CUDA_CHECK(cudaGetLastError());
  } else if (fused && communicate) {
    const cudaStream_t side = st.side.get();
    st.side.fork(main);
    if (st.pull_used || ctx.capturing()) tile::stream_wait(side, team, done, world, me, pull_epoch);
    tile::rank_copy_data(side, staging, a.x, size_t(a.m_per_rank * row_bytes));
    tile::stream_notify(side, team, ops::my_slot_at_peers(ctx, ready));
    gp.source = staging;
    gp.from_self = false;
    if (pull_first) {
      gp.pulled = gathered;
      gp.pull_slots = pull_slots;
    }
    ops::moe_gather_kernel<<<comm_sms, ops::kMoeThreads, 0, side>>>(gp);
    TL_CUDA_CHECK(cudaGetLastError());
    tile::stream_notify(side, team, ops::my_slot_at_peers(ctx, done, {{pull_epoch}}));
    st.pull_used = true;
  }
  ctx.trace("routing and gather enqueued");

  const gemm::GroupedGemmArgs g{a.dtype, sorted, a.w, y_sorted, a.n, a.hidden, groups,
                                tables.group_end, tables.group_weight, a.num_experts, entries};
  if (fused && communicate) {
    ops::run_grouped(g, cfg, tile::GroupWaitHooks{team, map, chunk_slots}, gemm_sms, gemm_ws, gemm_bytes, main);
    st.side.join(main);
  } else {
    ops::run_grouped(g, cfg, gemm::NoHooks{}, gemm_sms, gemm_ws, gemm_bytes, main);
  }
  if (!a.sorted_rows) {  // with sorted_rows the routing wrote each entry's row there itself
    const int blocks = int(std::min<int64_t>((entries + 7) / 8, 4 * ctx.sm_count()));
    ops::moe_unsort_kernel<<<blocks, 256, 0, main>>>(static_cast<char*>(a.y), y_sorted, tables.entry_row, entries,
                                                     out_row_bytes);
    TL_CUDA_CHECK(cudaGetLastError());
  }
  ctx.trace("grouped GEMM enqueued");
}

}  // namespace

void ag_moe(Context& ctx, const AgMoeArgs& a, const AgMoeOptions& o) {
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { ag_moe_enqueue(ctx, a, o, stream); });
}

void ag_moe_check(Context& ctx) {
  TL_CUDA_CHECK(cudaSetDevice(ctx.device()));
  ctx.wait_stream(ctx.stream(), kOp);
  ctx.op_state<AgMoeState>(kOp).bad_ids.raise_new(kOp, kBadIdEffect);
}

}  // namespace tilelink
