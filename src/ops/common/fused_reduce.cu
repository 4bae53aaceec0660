// src/ops/common/fused_reduce.cu — see fused_reduce.hpp.
#include "ops/common/fused_reduce.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ops/common/nvshmem_launch.hpp"
#include "ops/common/op_gemm.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/runtime/nccl.hpp"
#include "tilelink/tile/gemm_hooks.cuh"
#include "tilelink/tile/stream_signal.cuh"

namespace tilelink::ops {

ReduceState::ReduceState(Context& ctx) : side(ctx) {}
ReduceState::~ReduceState() {
  for (cudaEvent_t e : computed) cudaEventDestroy(e);
}

namespace {

// `load_store`: every peer is mapped here; otherwise every algorithm pushes over NVSHMEM, and no
// peer reads this rank's buffers.
int32_t readers_per_call(ReduceAlgo algo, CommMode mode, int world, bool load_store) {
  if (world == 1 || !load_store) return 0;
  switch (algo) {
    case ReduceAlgo::ring: return mode == CommMode::pull ? 1 : 0;
    case ReduceAlgo::full_mesh: return mode == CommMode::pull ? world - 1 : 0;
    default: return world - 1;  // all-reduce reads every peer's partial
  }
}

tile::Notify notify_mode(ReduceAlgo algo, CommMode mode, bool load_store) {
  if (!load_store) return tile::Notify::local;  // the GEMM reaches no peer; its reducer pushes
  if (algo == ReduceAlgo::one_shot || algo == ReduceAlgo::two_shot) return tile::Notify::all_ranks;
  if (algo == ReduceAlgo::full_mesh && mode == CommMode::pull) return tile::Notify::owner;
  return tile::Notify::local;
}

// `load_store`: every peer is mapped here; otherwise the pushes over NVSHMEM (nvshmem_launch.hpp).
template <class T>
void launch_reducer(const ll::Team& team, bool load_store, const RowBlocks& rb, void* partial, void* stage,
                    const ReduceRequest& r, const uint64_t* gemm_signals, uint64_t* unit_signals,
                    const uint64_t* ready, uint64_t* reads_done, uint64_t reads_expected, int blocks,
                    cudaStream_t stream) {
  const ReduceParams<T> p{team, rb, static_cast<const T*>(partial), static_cast<T*>(stage),
                          static_cast<T*>(r.out), gemm_signals, unit_signals, ready, reads_done,
                          reads_expected, r.algo, r.mode, reduce_worker_warps(rb.num_units(), blocks)};
  if (!load_store) {
    TL_CUDA_CHECK(p.algo == ReduceAlgo::two_shot ? launch_allreduce_push_nvshmem(p, blocks, stream)
                                                 : launch_full_mesh_push_nvshmem(p, blocks, stream));
    return;
  }
  switch (p.algo) {
    case ReduceAlgo::ring: ring_reduce_kernel<T><<<blocks, kReduceThreads, 0, stream>>>(p); break;
    case ReduceAlgo::full_mesh: full_mesh_reduce_kernel<T><<<blocks, kReduceThreads, 0, stream>>>(p); break;
    default: allreduce_kernel<T><<<blocks, kReduceThreads, 0, stream>>>(p); break;
  }
  TL_CUDA_CHECK(cudaGetLastError());
}

// Runs GEMM (+ tile notifications) and the reduction kernel. `overlap`: the reducer runs beside
// the GEMM on the side stream (fused); otherwise after it, on the caller's stream.
void gemm_and_reduce(Context& ctx, ReduceState& st, const ReduceRequest& r, bool overlap) {
  const int world = ctx.num_ranks(), me = ctx.rank();
  const int64_t k_plan = std::max(r.k, r.k_plan);
  const int comm_sms = world == 1 ? 0 : (r.comm_sms ? r.comm_sms : default_reduce_sms(topology_of(ctx), k_plan));
  const int gemm_sms = overlap ? ctx.sm_count() - comm_sms : ctx.sm_count();
  const gemm::GemmShape shape = gemm::packed({r.m, r.n, r.k});
  const gemm::GemmPlan plan = choose_op_plan(gemm::packed({r.m, r.n, k_plan}), r.dtype, gemm_sms);
  const auto& cfg = gemm::config_info(plan.config);
  // One-shot all-reduce has no row owners: a single block of all rows (any M).
  const bool one_shot = r.algo == ReduceAlgo::one_shot;
  const RowBlocks rb = RowBlocks::make(int32_t(r.m), int32_t(r.n), cfg.tile_m, cfg.tile_n, one_shot ? 1 : world);
  const bool load_store = ctx.peers_load_store();
  const tile::Notify notify = notify_mode(r.algo, r.mode, load_store);
  const bool per_source = notify != tile::Notify::local;
  const bool unit_per_source = r.algo != ReduceAlgo::ring;

  const std::string op = r.op;
  const int64_t elems = r.m * r.n;
  const size_t bytes = size_t(elems) * dtype_size(r.dtype);
  // One rank: the GEMM writes the result directly; no partial, no reduction.
  void* partial = world == 1 ? r.out : ctx.symmetric_workspace(op + ".partial", bytes);
  // The two-shot push over NVSHMEM adds W slots of up to ceil(M/W) rows in front of the [M, N] copy.
  const size_t stage_bytes =
      !load_store && r.algo == ReduceAlgo::two_shot
          ? bytes + size_t(world) * size_t(rb.max_block_rows()) * size_t(r.n) * dtype_size(r.dtype)
          : bytes;
  void* stage = world == 1 ? nullptr : ctx.symmetric_workspace(op + ".stage", stage_bytes);
  const int64_t gemm_slots = int64_t(rb.grid.num_tiles()) * (per_source ? world : 1);
  const int64_t unit_slots = int64_t(rb.num_unit_slots()) * (unit_per_source ? world : 1);
  // Slot layout: the reads counter and the per-rank handshakes first, at offsets that never
  // move when a later call grows the workspace in place; then the GEMM's and the units' slots.
  uint64_t* signals = ctx.signal_workspace(op + ".signals", 1 + world + gemm_slots + unit_slots);
  uint64_t* reads_done = signals;
  uint64_t* ready = signals + 1;
  uint64_t* gemm_signals = ready + world;
  uint64_t* unit_signals = gemm_signals + gemm_slots;
  drain_on_new_slots(ctx, st.side, r.stream, signals, st.last_signals);
  const uint64_t reads_expected =
      uint64_t(readers_per_call(r.algo, r.mode, world, load_store)) * uint64_t(comm_sms);

  ctx.begin_op(r.op, r.stream);
  ctx.trace(overlap ? "checked, buffers ready (fused)" : "checked, buffers ready (decomposed)");
  const ll::Team team = ctx.team();
  const cudaStream_t main = r.stream;
  // The GEMM starts on the rows the reduction consumes first (reduce_kernels.cuh).
  const int32_t first_row = one_shot ? int32_t(r.m * me / world) : rb.block_begin((me + 1) % world);
  const tile::TileNotifyHooks hooks{team, rb.grid, gemm_signals, notify, first_row};

  if (overlap && world > 1) st.side.fork(main);
  cudaStream_t reducer_stream = overlap ? st.side.get() : main;
  if (world > 1) {
    // This rank's buffers are free for this call: its previous call ended (stream order). One
    // kernel for all peers.
    notify_ready(ctx, reducer_stream, team, ready);
  }

  // One rank: nobody consumes the tile notifications, and publishing costs every CTA a wait for
  // its last stores (2-6 us per call on the H200, 4-8% of a decode-sized GEMM): plain GEMM.
  if (world == 1) run_op_gemm(r.dtype, r.a, r.b, partial, shape, gemm::NoHooks{}, plan, gemm_sms, main);
  else run_op_gemm(r.dtype, r.a, r.b, partial, shape, hooks, plan, gemm_sms, main);
  ctx.trace("GEMM enqueued");

  if (world > 1) {
    if (r.dtype == DType::bf16)
      launch_reducer<__nv_bfloat16>(team, load_store, rb, partial, stage, r, gemm_signals, unit_signals,
                                    ready, reads_done, reads_expected, comm_sms, reducer_stream);
    else
      launch_reducer<__half>(team, load_store, rb, partial, stage, r, gemm_signals, unit_signals, ready,
                             reads_done, reads_expected, comm_sms, reducer_stream);
    ctx.trace("reduction enqueued");
    if (overlap) st.side.join(main);
  }
}

}  // namespace

void validate_reduce(const Context& ctx, const ReduceRequest& r) {
  const char* op = r.op;
  const int w = ctx.num_ranks();
  TL_REQUIRE(r.dtype == DType::bf16 || r.dtype == DType::fp16, op, ": unsupported dtype");
  TL_REQUIRE(r.a && r.b && r.out, op, ": a, b and c must be device pointers (rank ", ctx.rank(), ")");
  TL_REQUIRE(r.m > 0 && r.n > 0 && r.k > 0, op, ": m, n, k must be positive (got ", r.m, ", ", r.n, ", ", r.k, ")");
  // Reduce-scatter hands every rank M/W rows; the all-reduce splits rows unevenly where it must.
  if (r.algo == ReduceAlgo::ring || r.algo == ReduceAlgo::full_mesh)
    TL_REQUIRE(r.m % w == 0, op, ": m=", r.m, " must be divisible by the world size ", w,
               " (each rank receives m / world rows)");
  TL_REQUIRE(r.k % 8 == 0, op, ": k=", r.k, " must be a multiple of 8 (16-byte rows for TMA)");
  TL_REQUIRE(r.n % 8 == 0, op, ": n=", r.n, " must be a multiple of 8 (16-byte rows)");
  TL_REQUIRE(reinterpret_cast<uintptr_t>(r.out) % 16 == 0, op, ": c must be 16-byte aligned");
  TL_REQUIRE(r.m * r.n <= INT32_MAX, op, ": m*n too large");
  TL_REQUIRE(r.comm_sms >= 0 && r.comm_sms < ctx.sm_count(), op, ": comm_sms=", r.comm_sms,
             " must be in [0, ", ctx.sm_count(), ") (this rank's SM share)");
  TL_REQUIRE(ctx.peers_load_store() || w == 1 || (r.algo == ReduceAlgo::full_mesh && r.mode == CommMode::push) ||
                 r.algo == ReduceAlgo::two_shot,
             op,
             ": this world reaches its peers through NVSHMEM put-with-signal (another node, or one node per"
             " process), where only the schedules that push run: reduce-scatter full_mesh with mode push,"
             " all-reduce two_shot");
}

void fused_reduce(Context& ctx, ReduceState& st, const ReduceRequest& r) {
  gemm_and_reduce(ctx, st, r, /*overlap=*/true);
}

void decomposed_reduce(Context& ctx, ReduceState& st, const ReduceRequest& r) {
  const int world = ctx.num_ranks();
  if (world == 1) {
    // Nothing to reduce: the GEMM, on cuBLAS.
    ctx.begin_op(r.op);
    ctx.cublas().run(r.dtype, r.a, r.b, r.out, r.m, r.n, r.k, r.stream);
    return;
  }
  if (ctx.max_ranks_per_gpu() > 1) {
    // NCCL cannot run two ranks on one GPU: reduce with tilelink's kernel, after the GEMM.
    gemm_and_reduce(ctx, st, r, /*overlap=*/false);
    return;
  }
  ncclComm_t comm = nccl_comm(ctx);
  const cudaStream_t main = r.stream;
  // cuBLAS then NCCL: nothing reads the call's epoch, so no kernel advances it (see ag_gemm).
  ctx.begin_op(r.op);
  const size_t bytes = size_t(r.m * r.n) * dtype_size(r.dtype);
  void* partial = ctx.symmetric_workspace(std::string(r.op) + ".partial", bytes);
  // cuBLAS, not the engine: the engine has no split-K yet and loses at decode-sized M (0.61x at
  // M = 256, docs/PERF.md), and the decomposed path must never be slower than the user's own.
  ctx.cublas().run(r.dtype, r.a, r.b, partial, r.m, r.n, r.k, main);
  const bool all_reduce = r.algo == ReduceAlgo::one_shot || r.algo == ReduceAlgo::two_shot;
  if (all_reduce)
    nccl_check(ncclAllReduce(partial, r.out, size_t(r.m * r.n), nccl_type(r.dtype), ncclSum, comm, main), ctx,
               "ncclAllReduce");
  else
    nccl_check(ncclReduceScatter(partial, r.out, size_t(r.m / world * r.n), nccl_type(r.dtype), ncclSum, comm, main),
               ctx, "ncclReduceScatter");
}

}  // namespace tilelink::ops
