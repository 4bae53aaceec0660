// src/ops/moe/moe_rs.cu — grouped GEMM + top-k weighted reduce + ReduceScatter (mixture-of-experts).
//
// Per call on rank r (world W, epoch e advanced on the device by begin_op), caller's stream:
//   the routing tables, groups (chunk, expert) with chunk c = the tokens of rank (r + 1 + c) % W
//   (the rows the next rank needs first, r's own last); h's rows into that order; the chunks'
//   counting signals armed for this call.
// Side stream (forked there): tell every peer "ready" (r's receive buffer is free: its previous
//   call ended, in stream order), then the reduce kernel: for each chunk, wait until all of its
//   tiles (counted from the routing's group sizes) are stored, write its tokens' top-k weighted sums into their rank's receive buffer,
//   publish; finally add the ranks' partials of r's own tokens into out, in rank order.
// Caller's stream: the grouped GEMM, every stored tile counted in its chunk's signal. Join.
// Decomposed: GEMM, weighted sums of all tokens, NCCL reduce-scatter. One rank: GEMM, sums.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "ops/common/nvshmem_launch.hpp"
#include "ops/common/op_call.hpp"
#include "ops/common/side_stream.hpp"
#include "ops/common/uniform_check.hpp"
#include "ops/moe/moe_kernels.cuh"
#include "ops/moe/moe_rs_kernels.cuh"
#include "ops/moe/routing.hpp"
#include "ops/moe/run_grouped.hpp"
#include "tilelink/gemm/grouped.hpp"
#include "tilelink/ops/moe/moe_rs.hpp"
#include "tilelink/runtime/nccl.hpp"
#include "tilelink/tile.cuh"

namespace tilelink {
namespace {

constexpr const char* kOp = "moe_rs";
constexpr const char* kBadIdEffect = "they contributed nothing to the sums";

struct MoeRsState {
  explicit MoeRsState(Context& ctx) : side(ctx) {}
  ops::SideStream side;
  ops::UniformCheck uniform;
  ops::MoeRoutingErrors bad_ids;
  const void* last_workspace = nullptr;
};

void validate_local(const Context& ctx, const MoeRsArgs& a, const MoeRsOptions& o) {
  TL_REQUIRE(a.dtype == DType::bf16 || a.dtype == DType::fp16, kOp, ": unsupported dtype");
  TL_REQUIRE(a.h && a.topk_ids && a.topk_weights && a.w && a.out, kOp,
             ": h, topk_ids, topk_weights, w and out must be device pointers (rank ", ctx.rank(), ")");
  TL_REQUIRE(a.tokens > 0 && a.hidden > 0 && a.k_shard > 0, kOp, ": tokens, hidden and k_shard must be positive (got ",
             a.tokens, ", ", a.hidden, ", ", a.k_shard, ")");
  TL_REQUIRE(a.tokens % ctx.num_ranks() == 0, kOp, ": tokens=", a.tokens, " must be a multiple of the world size ",
             ctx.num_ranks(), " (each rank receives tokens / world rows)");
  TL_REQUIRE(a.num_experts > 0, kOp, ": num_experts must be positive (got ", a.num_experts, ")");
  TL_REQUIRE(a.topk >= 1 && a.topk <= a.num_experts, kOp, ": topk=", a.topk, " must be in [1, num_experts=",
             a.num_experts, "]");
  TL_REQUIRE(a.hidden % 8 == 0 && a.k_shard % 8 == 0, kOp, ": hidden=", a.hidden, " and k_shard=", a.k_shard,
             " must be multiples of 8 (16-byte rows)");
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  TL_REQUIRE(aligned(a.h) && aligned(a.w) && aligned(a.out), kOp, ": h, w and out must be 16-byte aligned");
  TL_REQUIRE(reinterpret_cast<uintptr_t>(a.h_rows) % 4 == 0, kOp, ": h_rows must be 4-byte aligned");
  TL_REQUIRE(reinterpret_cast<uintptr_t>(a.topk_ids) % 4 == 0 && reinterpret_cast<uintptr_t>(a.topk_weights) % 4 == 0,
             kOp, ": topk_ids and topk_weights must be 4-byte aligned");
  TL_REQUIRE(a.tokens * a.topk <= INT32_MAX && int64_t(a.num_experts) * ctx.num_ranks() < (1 << 24), kOp,
             ": too many tokens x topk (", a.tokens * a.topk, ") or experts");
  TL_REQUIRE(o.comm_sms >= 0 && o.comm_sms < ctx.sm_count(), kOp, ": comm_sms=", o.comm_sms, " must be in [0, ",
             ctx.sm_count(), ")");
  TL_REQUIRE(o.path != OpPath::decomposed || ctx.num_ranks() == 1 || ctx.max_ranks_per_gpu() == 1, kOp,
             ": the decomposed path (NCCL) needs one GPU per rank");
}

template <class T>
void launch_topk_sum(const ops::MoeTopkSum& s, void* out, int64_t first, int64_t count, int sms, cudaStream_t stream) {
  const int blocks = int(std::clamp<int64_t>((count + 7) / 8, 1, 4 * int64_t(sms)));
  ops::moe_topk_sum_kernel<T><<<blocks, 256, 0, stream>>>(s, static_cast<T*>(out), first, count);
  TL_CUDA_CHECK(cudaGetLastError());
}

void moe_rs_enqueue(Context& ctx, const MoeRsArgs& a, const MoeRsOptions& o, cudaStream_t main) {
  validate_local(ctx, a, o);
  auto& st = ctx.op_state<MoeRsState>(kOp);
  if (!ctx.capturing()) st.bad_ids.raise_new(kOp, kBadIdEffect);
  const int world = ctx.num_ranks(), me = ctx.rank();
  const OpPath path = o.path == OpPath::automatic ? OpPath::fused : o.path;
  st.uniform.require(ctx, kOp,
                     {{"tokens", a.tokens}, {"hidden", a.hidden}, {"k_shard", a.k_shard},
                      {"num_experts", a.num_experts}, {"topk", a.topk}, {"dtype", int64_t(a.dtype)},
                      {"path", int64_t(path)}, {"comm_sms", o.comm_sms}, {"h_rows", a.h_rows != nullptr}},
                     {});

  const int64_t m = a.tokens / world, entries = a.tokens * a.topk;
  const int64_t esize = int64_t(dtype_size(a.dtype));
  const bool fused = path == OpPath::fused && world > 1;
  const bool shared_gpu = ctx.max_ranks_per_gpu() > 1;
  const int comm_sms = fused ? (o.comm_sms ? o.comm_sms : std::clamp(ctx.sm_count() / 8, 1, 16)) : 0;
  const int gemm_sms = std::max(2, ctx.sm_count() - (fused ? comm_sms + (shared_gpu ? 1 : 0) : 0));

  const ops::MoeRoutingShape rs{a.tokens, m, a.topk, a.num_experts, world, (me + 1) % world};
  const int32_t groups = rs.groups();
  const gemm::GroupedConfig cfg = gemm::choose_grouped_config(entries, groups, a.hidden, a.k_shard);
  const gemm::GroupedTile tile_shape = gemm::grouped_config_tile(cfg);
  const size_t routing_bytes = ops::moe_routing_workspace_bytes(rs);
  const size_t gemm_bytes = gemm::grouped_gemm_workspace_bytes(cfg, groups, gemm_sms);

  char* sorted = static_cast<char*>(ctx.symmetric_workspace("moe_rs.sorted", entries * a.k_shard * esize));
  char* y_sorted = static_cast<char*>(ctx.symmetric_workspace("moe_rs.y_sorted", entries * a.hidden * esize));
  void* routing_ws = ctx.symmetric_workspace("moe_rs.routing", routing_bytes);
  void* gemm_ws = ctx.symmetric_workspace("moe_rs.gemm", gemm_bytes);
  void* partial = !fused && world > 1 ? ctx.symmetric_workspace("moe_rs.partial", a.tokens * a.hidden * esize) : nullptr;
  float* recv = fused ? static_cast<float*>(ctx.symmetric_workspace("moe_rs.recv", size_t(world * m * a.hidden) * 4))
                      : nullptr;
  // Peers reached through NVSHMEM: the shares are put from here (nvshmem_launch.hpp).
  const bool load_store = ctx.peers_load_store();
  float* send = fused && !load_store
                    ? static_cast<float*>(ctx.symmetric_workspace("moe_rs.send", size_t(world * m * a.hidden) * 4))
                    : nullptr;
  // Slots: "ready" per rank, the chunks' counting signals, the partials' (block, source) slots.
  uint64_t* signals = ctx.signal_workspace("moe_rs.signals", 2 * world + int64_t(comm_sms) * world);
  uint64_t* ready = signals;
  uint64_t* counters = signals + world;
  uint64_t* recv_slots = signals + 2 * world;
  ops::drain_on_new_slots(ctx, st.side, main, signals, st.last_workspace);

  ctx.begin_op(kOp, main);
  const ll::Team team = ctx.team();
  const ops::MoeRoutingTables tables =
      ops::enqueue_moe_routing(rs, a.topk_ids, routing_ws, routing_bytes, st.bad_ids.device_counter(), main);
  // h's rows in group order: sorted row i is h's row of entry sorted_entry[i] (a local gather).
  ops::MoeGatherParams gp{team, {a.num_experts, ctx.sm_count(), world}, static_cast<const char*>(a.h), sorted,
                          tables.sorted_entry, tables.group_end, a.h_rows, /*topk=*/1, m, a.k_shard * esize, nullptr,
                          nullptr, /*from_self=*/true};
  ops::moe_gather_kernel<<<ctx.sm_count(), ops::kMoeThreads, 0, main>>>(gp);
  TL_CUDA_CHECK(cudaGetLastError());

  const gemm::GroupedGemmArgs g{a.dtype, sorted, a.w, y_sorted, a.hidden, a.k_shard, groups,
                                tables.group_end, tables.group_weight, a.num_experts, entries};
  const ops::MoeTopkSum sum{y_sorted, tables.entry_row, a.topk_weights, a.topk, a.hidden};
  auto topk_sum = [&](void* out, int64_t first, int64_t count) {
    if (a.dtype == DType::bf16) launch_topk_sum<__nv_bfloat16>(sum, out, first, count, ctx.sm_count(), main);
    else launch_topk_sum<__half>(sum, out, first, count, ctx.sm_count(), main);
  };
  if (world == 1) {
    ops::run_grouped(g, cfg, gemm::NoHooks{}, gemm_sms, gemm_ws, gemm_bytes, main);
    topk_sum(a.out, 0, m);
  } else if (!fused) {
    ops::run_grouped(g, cfg, gemm::NoHooks{}, gemm_sms, gemm_ws, gemm_bytes, main);
    topk_sum(partial, 0, a.tokens);
    nccl_check(ncclReduceScatter(partial, a.out, size_t(m * a.hidden), nccl_type(a.dtype), ncclSum, nccl_comm(ctx), main),
               ctx, "ncclReduceScatter");
  } else {
    ops::moe_rs_arm_kernel<<<1, 32 * ((world + 31) / 32), 0, main>>>(team, counters, world);
    TL_CUDA_CHECK(cudaGetLastError());
    const cudaStream_t side = st.side.get();
    st.side.fork(main);
    ops::notify_ready(ctx, side, team, ready);
    const ops::MoeRsFusedParams p{team,
                                  sum,
                                  m,
                                  counters,
                                  tables.group_end,
                                  a.num_experts,
                                  tile_shape.tile_m,
                                  int32_t((a.hidden + tile_shape.tile_n - 1) / tile_shape.tile_n),
                                  recv,
                                  recv_slots,
                                  ready,
                                  a.out,
                                  send};
    const bool bf16 = a.dtype == DType::bf16;
    if (!load_store) {
      TL_CUDA_CHECK(bf16 ? ops::launch_moe_rs_fused_nvshmem<__nv_bfloat16>(p, comm_sms, side)
                         : ops::launch_moe_rs_fused_nvshmem<__half>(p, comm_sms, side));
    } else {
      if (bf16) ops::moe_rs_fused_kernel<__nv_bfloat16><<<comm_sms, ops::kMoeRsThreads, 0, side>>>(p);
      else ops::moe_rs_fused_kernel<__half><<<comm_sms, ops::kMoeRsThreads, 0, side>>>(p);
      TL_CUDA_CHECK(cudaGetLastError());
    }
    ops::run_grouped(g, cfg, tile::GroupCountHooks{counters, a.num_experts}, gemm_sms, gemm_ws, gemm_bytes, main);
    st.side.join(main);
  }
  ctx.trace("grouped GEMM and reduction enqueued");
}

}  // namespace

void moe_rs(Context& ctx, const MoeRsArgs& a, const MoeRsOptions& o) {
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { moe_rs_enqueue(ctx, a, o, stream); });
}

void moe_rs_check(Context& ctx) {
  TL_CUDA_CHECK(cudaSetDevice(ctx.device()));
  ctx.wait_stream(ctx.stream(), kOp);
  ctx.op_state<MoeRsState>(kOp).bad_ids.raise_new(kOp, kBadIdEffect);
}

}  // namespace tilelink
