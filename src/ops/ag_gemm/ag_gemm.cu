// src/ops/ag_gemm/ag_gemm.cu — AllGather-GEMM: validation, buffers, and the two streams.
//
// Per call, on rank r (world W, epoch e — advanced on the device at the start of the call, so
// that a CUDA graph replay gets its own):
//   side stream (after everything before the call on the caller's stream):
//     wait until every peer finished reading r's rows of the latest pull call ("done"; that
//     call's epoch is kept on the device, in "pull_epoch")
//     copy r's rows into its slot of the symmetric gathered A, publish those chunks
//     tell every peer "ready" (push: my gathered A is free; pull: my rows are in place)
//     move the other ranks' rows: SM gather kernel, or copy engine + stream signals
//     pull: tell every peer "done" reading its rows
//   caller's stream: the GEMM over the gathered A; each tile waits for the chunks it reads.
//   join: the caller's stream waits for the side stream.
// Decomposed, one GPU per rank: cuBLAS multiplies this rank's rows while the copy engine pulls
// the peers' rows, then one cuBLAS GEMM per peer as its rows land (stream events; PyTorch's
// async-TP has this structure) — or, where the rows per rank are too few for that to pay,
// NCCL's all-gather, then one cuBLAS GEMM. On a shared GPU: the side stream's gather joined
// before one cuBLAS GEMM.
// Peers reachable only through NVSHMEM (another node, or one node per process): "ready" and the
// pushes go by put-with-signal (gather_nvshmem.cu); the GEMM's waits are the same local ones.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "ops/ag_gemm/gather_nvshmem.hpp"
#include "ops/common/nvshmem_launch.hpp"
#include "ops/common/op_call.hpp"
#include "ops/common/op_gemm.hpp"
#include "ops/common/rank_split.hpp"
#include "ops/common/rules.hpp"
#include "ops/common/side_stream.hpp"
#include "ops/common/uniform_check.hpp"
#include "tilelink/gemm/cublas_gemm.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "tilelink/ops/ag_gemm/gather_kernel.cuh"
#include "tilelink/tile/gemm_hooks.cuh"
#include "tilelink/runtime/nccl.hpp"
#include "tilelink/tile/rank_copy.hpp"
#include "tilelink/tile/stream_signal.cuh"

namespace tilelink {
namespace {

constexpr const char* kOp = "ag_gemm";

struct AgGemmState {
  explicit AgGemmState(Context& ctx) : side(ctx) {}
  ops::SideStream side;
  ops::UniformCheck uniform;
  // A pull-mode call was made or captured with these slots: from then on every call waits for
  // the latest one's readers (its epoch is on the device, so replays of a graph are covered).
  bool pull_used = false;
  const void* last_workspace = nullptr;
  // Decomposed per-rank GEMMs: event i is recorded when the rows of the i-th peer in ring order
  // have been pulled (created on first use, on this rank's device).
  std::vector<cudaEvent_t> pulled;
  ~AgGemmState() {
    for (cudaEvent_t e : pulled) cudaEventDestroy(e);
  }
};

void validate_local(const Context& ctx, const AgGemmArgs& a, const AgGemmOptions& o) {
  TL_REQUIRE(a.dtype == DType::bf16 || a.dtype == DType::fp16, kOp, ": unsupported dtype");
  TL_REQUIRE(a.a && a.b && a.c, kOp, ": a, b and c must be device pointers (rank ", ctx.rank(), ")");
  TL_REQUIRE(a.m_per_rank > 0 && a.n > 0 && a.k > 0, kOp, ": m_per_rank, n, k must be positive (got ",
             a.m_per_rank, ", ", a.n, ", ", a.k, ")");
  TL_REQUIRE(a.k % 8 == 0, kOp, ": k=", a.k, " must be a multiple of 8 (16-byte rows for TMA)");
  TL_REQUIRE(a.n % 8 == 0, kOp, ": n=", a.n, " must be a multiple of 8 (16-byte rows for TMA)");
  TL_REQUIRE(reinterpret_cast<uintptr_t>(a.a) % 16 == 0, kOp, ": a must be 16-byte aligned");
  TL_REQUIRE(a.m_per_rank * ctx.num_ranks() <= INT32_MAX, kOp, ": M too large");
  TL_REQUIRE(o.comm_sms >= 0 && o.comm_sms < ctx.sm_count(), kOp, ": comm_sms=", o.comm_sms,
             " must be in [0, ", ctx.sm_count(), ") (this rank's SM share)");
  TL_REQUIRE(o.chunk_rows >= 0, kOp, ": chunk_rows must be >= 0");
}

// Peers reached only through NVSHMEM put-with-signal: the fused path pushes on SMs (pull and the
// copy engine address the peers' heaps directly); the decomposed one is NCCL's, which needs a
// GPU per rank.
void validate_paths_without_load_store(const Context& ctx, const AgGemmOptions& o, OpPath path) {
  if (ctx.peers_load_store() || ctx.num_ranks() == 1) return;
  const char* why = " (this world reaches its peers through NVSHMEM put-with-signal: another node, or one node"
                    " per process)";
  if (path == OpPath::fused)
    TL_REQUIRE(o.mode == CommMode::push && o.engine == CommEngine::sm, kOp,
               ": the fused path pushes with SMs here; mode=pull and engine=copy_engine need peers reachable by"
               " load/store", why);
  else
    TL_REQUIRE(ctx.max_ranks_per_gpu() == 1, kOp,
               ": the decomposed path is NCCL's all-gather here, which needs a GPU per rank; ranks share a GPU",
               why, ": use the fused path");
}

int default_comm_sms(const Context& ctx) {
  // Enough blocks to keep several chunks in flight; on a shared GPU, a slice of this rank's share.
  return std::clamp(ctx.sm_count() / 8, 1, 16);
}

int default_chunk_rows(int64_t m_per_rank, int rows_per_unit, CommEngine engine, int comm_sms, int world) {
  // Copy engine: few large copies (each copy has microseconds of fixed cost).
  if (engine == CommEngine::copy_engine) return int(m_per_rank);
  // SMs: a gather block moves one chunk at a time (~43 GB/s over NVLink), so there must be at
  // least as many chunks to move, (W-1) x chunks per rank, as blocks — at M = 512 on 2 H200s two
  // 128-row chunks kept 2 of 16 blocks busy and the fused op ran at 0.49x of NCCL + cuBLAS.
  // At least 8 chunks per rank (tiles start as their rows land), at least 8 rows each, and
  // whole GEMM row units when they are that large (a tile then waits for one chunk).
  const int64_t chunks = std::max<int64_t>(8, (comm_sms + world - 2) / std::max(1, world - 1));
  const int64_t rows = std::max<int64_t>(8, (m_per_rank + chunks - 1) / chunks);
  if (rows >= rows_per_unit) return int((rows + rows_per_unit - 1) / rows_per_unit * rows_per_unit);
  return int((rows + 7) / 8 * 8);
}

// Decomposed with one GPU per rank and enough rows per rank: one cuBLAS GEMM per rank's rows,
// this rank's own first, each peer's as soon as the copy engine has pulled
// its rows into the gathered A. Every cross-rank signal sits before the first GEMM or after the
// pulls: cuBLAS may hold every SM while it runs, and a signal kernel queued behind it would wait
// for its end (copies and stream events need no SM).
void enqueue_per_rank_gemms(Context& ctx, AgGemmState& st, const AgGemmArgs& a, char* gathered,
                            uint64_t* signals, bool communicate, cudaStream_t main) {
  const int world = ctx.num_ranks(), me = ctx.rank();
  const int64_t rank_bytes = a.m_per_rank * a.k * int64_t(dtype_size(a.dtype));
  const int64_t c_rank_bytes = a.m_per_rank * a.n * int64_t(dtype_size(a.dtype));
  char* c = static_cast<char*>(a.c);
  auto gemm_rows_of = [&](int q, const void* rows) {
    ctx.cublas().run(a.dtype, rows, a.b, c + q * c_rank_bytes, a.m_per_rank, a.n, a.k, main);
  };
  if (!communicate) {
    // The same GEMMs over the A an earlier call gathered (bitwise the same C).
    for (int step = 0; step < world; ++step)
      gemm_rows_of(tile::ring_next(me, step, world), gathered + tile::ring_next(me, step, world) * rank_bytes);
    return;
  }
  uint64_t* ready = signals;
  uint64_t* done = signals + world;
  uint64_t* pull_epoch = signals + 2 * world;
  const ll::Team team = ctx.team();
  while (st.pulled.size() < size_t(world - 1)) {
    cudaEvent_t e = nullptr;
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    st.pulled.push_back(e);
  }

  // Handshake: peers of the latest pull call are done with this rank's slot; refill it; tell
  // every peer; wait until every peer's rows are in its slot.
  if (st.pull_used) tile::stream_wait(main, team, done, world, me, pull_epoch);
  tile::rank_copy_data(main, gathered + me * rank_bytes, a.a, size_t(rank_bytes));
  tile::stream_notify(main, team, ops::my_slot_at_peers(ctx, ready));
  tile::stream_wait(main, team, ready, world, me);

  // Side stream: pull the peers' rows in ring order, then tell them this rank is done reading.
  const cudaStream_t side = st.side.get();
  st.side.fork(main);
  for (int step = 1; step < world; ++step) {
    char* rows = gathered + tile::ring_next(me, step, world) * rank_bytes;
    tile::rank_copy_data(side, rows, ctx.peer_ptr(rows, tile::ring_next(me, step, world)), size_t(rank_bytes));
    TL_CUDA_CHECK(cudaEventRecord(st.pulled[step - 1], side));
  }
  tile::stream_notify(side, team, ops::my_slot_at_peers(ctx, done, {{pull_epoch}}));
  st.pull_used = true;

  // Caller's stream: the GEMMs, each rank's rows into its rows of C. This rank's own rows are read
  // from its slot (copied above, in stream order): the same operands, so the same cuBLASLt plan,
  // as the GEMM of a call that does not communicate.
  gemm_rows_of(me, gathered + me * rank_bytes);
  for (int step = 1; step < world; ++step) {
    const int peer = tile::ring_next(me, step, world);
    TL_CUDA_CHECK(cudaStreamWaitEvent(main, st.pulled[step - 1], 0));
    gemm_rows_of(peer, gathered + peer * rank_bytes);
  }
  st.side.join(main);
}

}  // namespace

static void ag_gemm_enqueue(Context& ctx, const AgGemmArgs& a, const AgGemmOptions& o, cudaStream_t main) {
  validate_local(ctx, a, o);
  auto& st = ctx.op_state<AgGemmState>(kOp);
  const OpPath path = o.path == OpPath::automatic ? ag_gemm_choose_path(ctx, a) : o.path;
  validate_paths_without_load_store(ctx, o, path);
  // N may differ between ranks (each has its own B); the chunk layout, which every rank must
  // share, is planned for the largest.
  const int64_t n_max = st.uniform.require(ctx, kOp,
                                           {{"m_per_rank", a.m_per_rank}, {"k", a.k}, {"dtype", int64_t(a.dtype)},
                                            {"mode", int64_t(o.mode)}, {"engine", int64_t(o.engine)},
                                            {"comm_sms", o.comm_sms}, {"chunk_rows", o.chunk_rows},
                                            {"communicate", o.communicate}, {"path", int64_t(path)},
                                            {"split", int64_t(o.split)}},
                                           {{"n", a.n}})[0];
  const bool overlap = path == OpPath::fused;

  const int world = ctx.num_ranks(), me = ctx.rank();
  const int64_t m_total = a.m_per_rank * world;
  const int64_t row_bytes = a.k * int64_t(dtype_size(a.dtype));
  // Decomposed on a shared GPU: nothing runs beside the gather, so the copy engines move it
  // (the SM gather kernel would get only this rank's slice of SMs). A call being captured in a
  // CUDA graph gathers on SMs: the first replay of a graph holding copies between GPUs stalled
  // on the H200 (ranks on two GPUs, every rank waiting for a chunk whose copy never ran), while
  // the same graphs without such copies replayed fine.
  const CommEngine engine =
      ctx.capturing() ? CommEngine::sm : overlap ? o.engine : CommEngine::copy_engine;
  const bool sm_engine = engine == CommEngine::sm && world > 1 && o.communicate;
  // The side stream runs small kernels before its gather (the bounded one-warp waits, unlike
  // cuStreamWaitValue; the copy of this rank's own rows) and GEMM tiles wait for what comes after
  // them, so each rank keeps one SM of its share free for them. Without it, ranks sharing a GPU
  // could fill every SM with GEMM tiles and *other* ranks' gather blocks (4 ranks per H200:
  // 4 x (29 + 4) = 132), leaving none for a side stream's next kernel. With the copy engine that
  // SM is all the communication takes.
  const bool shared_gpu = ctx.max_ranks_per_gpu() > 1;
  const int comm_sms = sm_engine ? (o.comm_sms ? o.comm_sms : default_comm_sms(ctx))
                                 : (world > 1 && o.communicate ? 1 : 0);
  const int gemm_sms = std::max(1, ctx.sm_count() - comm_sms - (sm_engine && shared_gpu ? 1 : 0));

  const gemm::GemmShape shape = gemm::packed({m_total, a.n, a.k});
  const gemm::GemmPlan plan = ops::choose_op_plan(shape, a.dtype, gemm_sms);
  const auto& cfg = gemm::config_info(
      n_max == a.n ? plan.config : ops::choose_op_plan(gemm::packed({m_total, n_max, a.k}), a.dtype, gemm_sms).config);
  const int rows_per_unit = cfg.tile_m * cfg.cluster_m;
  const auto map = tile::RowChunkMapping::make(
      int32_t(a.m_per_rank),
      o.chunk_rows ? o.chunk_rows : default_chunk_rows(a.m_per_rank, rows_per_unit, engine, comm_sms, world),
      world);

  // Buffers. With one rank the gathered A is A itself.
  char* gathered = world == 1 ? const_cast<char*>(static_cast<const char*>(a.a))
                              : static_cast<char*>(ctx.symmetric_workspace("ag_gemm.a", m_total * row_bytes));
  // Slot layout: the per-rank handshakes and the latest pull call's epoch (local) first, at
  // offsets that never move when a later call grows the workspace in place; then one slot per
  // chunk.
  uint64_t* signals = ctx.signal_workspace("ag_gemm.signals", 2 * world + 1 + map.num_tiles());
  uint64_t* ready = signals;
  uint64_t* done = signals + world;
  uint64_t* pull_epoch = signals + 2 * world;
  uint64_t* chunk_sig = signals + 2 * world + 1;
  // New slots know nothing of earlier pull calls.
  if (ops::drain_on_new_slots(ctx, st.side, main, signals, st.last_workspace)) st.pull_used = false;

  // NCCL (or nothing) then one cuBLAS GEMM: no kernel of this call reads the call's epoch (the
  // wait for pull readers compares with the device word pull_epoch), so the call need not pay a
  // kernel to advance it — a few us, which decode-sized calls would feel against NCCL + cuBLAS.
  // Whether the split pays is judged on the largest N, which every rank agrees on.
  AgGemmArgs widest = a;
  widest.n = n_max;
  const bool split =
      !overlap && ops::split_by_rank(ctx, o.split, ops::ag_gemm_split_decomposed(topology_of(ctx), widest), kOp);
  const bool collective_then_gemm = !overlap && !split && (world == 1 || ctx.max_ranks_per_gpu() == 1);
  if (collective_then_gemm) ctx.begin_op(kOp);
  else ctx.begin_op(kOp, main);
  ctx.trace("checked, buffers ready");
  const ll::Team team = ctx.team();
  const cudaStream_t side = st.side.get();
  auto cublas_gemm = [&] { ctx.cublas().run(a.dtype, gathered, a.b, a.c, m_total, a.n, a.k, main); };
  auto copy_out = [&] {
    if (a.a_gathered)
      TL_CUDA_CHECK(cudaMemcpyAsync(a.a_gathered, gathered, m_total * row_bytes, cudaMemcpyDefault, main));
  };
  if (split) {
    enqueue_per_rank_gemms(ctx, st, a, gathered, signals, o.communicate, main);
    copy_out();
    return;
  }
  if (collective_then_gemm) {
    // Decomposed with one GPU per rank: NCCL's all-gather into the gathered A, then cuBLAS.
    // Peers of the latest pull-mode call may still be reading this rank's rows there.
    if (world > 1 && o.communicate) {
      if (st.pull_used || ctx.capturing()) tile::stream_wait(main, team, done, world, me, pull_epoch);
      nccl_check(ncclAllGather(a.a, gathered, size_t(a.m_per_rank * a.k), nccl_type(a.dtype), nccl_comm(ctx), main),
                 ctx, "ncclAllGather");
    }
    cublas_gemm();
    copy_out();
    return;
  }
  char* my_rows = gathered + int64_t(me) * a.m_per_rank * row_bytes;
  const int cpr = map.chunks_per_rank;

  // Every stream-ordered signal below is a one-block kernel (tile::stream_notify/stream_wait).
  // Ranks sharing a GPU may fill their SM shares with GEMM tiles that wait for these very slots,
  // so each rank keeps one SM of its share for them (gemm_sms above).
  const bool gather = world > 1 && o.communicate;
  if (world > 1 && !o.communicate) tile::stream_notify(main, team, {{chunk_sig, map.num_tiles()}});
  if (gather) {
    st.side.fork(main);
    // Peers may still be pulling this rank's rows of the latest pull-mode call.
    if (st.pull_used || ctx.capturing()) tile::stream_wait(side, team, done, world, me, pull_epoch);
    tile::rank_copy_data(side, my_rows, a.a, a.m_per_rank * row_bytes);
    // My chunks (for my GEMM) and "ready" (for my peers).
    ops::notify_ready(ctx, side, team, ready, {{chunk_sig + map.tile(me, 0), cpr}});

    ctx.trace("side stream: own rows copied and published, ready sent");
    if (sm_engine) {
      ops::AgGatherParams p{team, map, gathered, static_cast<const char*>(a.a), row_bytes,
                            chunk_sig, ready, o.mode};
      if (ctx.peers_load_store()) {
        ops::ag_gather_kernel<<<comm_sms, ops::kGatherThreads, 0, side>>>(p);
        TL_CUDA_CHECK(cudaGetLastError());
      } else {
        TL_CUDA_CHECK(ops::launch_ag_gather_nvshmem(p, comm_sms, side));
      }
    } else {
      for (int step = 1; step < world; ++step) {
        const int peer = o.mode == CommMode::push ? tile::ring_prev(me, step, world)
                                                  : tile::ring_next(me, step, world);
        tile::stream_wait(side, team, ready + peer, 1, -1);
        for (int c = 0; c < cpr; ++c) {
          const int32_t t = map.tile(o.mode == CommMode::push ? me : peer, c);
          const tile::RowRange rr = map.rows(t);
          char* rows = gathered + int64_t(rr.begin) * row_bytes;
          const size_t bytes = size_t(rr.count) * row_bytes;
          if (o.mode == CommMode::push) {
            tile::rank_copy_data(side, ctx.peer_ptr(rows, peer),
                                 static_cast<const char*>(a.a) + (rr.begin - int64_t(me) * a.m_per_rank) * row_bytes,
                                 bytes);
            tile::stream_notify(side, team, {{ctx.peer_ptr(chunk_sig + map.notify_slot(t), peer)}});
          } else {
            tile::rank_copy_data(side, rows, ctx.peer_ptr(rows, peer), bytes);
            tile::stream_notify(side, team, {{chunk_sig + map.notify_slot(t)}});
          }
        }
      }
    }
    if (!overlap && o.mode == CommMode::push) {
      // Decomposed: nothing waits tile by tile for the rows the peers push here, so the side
      // stream does, for all of them, before the GEMM is released.
      tile::stream_wait(side, team, chunk_sig, map.num_tiles(), -1);
    }
    if (o.mode == CommMode::pull) {
      // "done" at every peer, and this call's epoch for this rank's next call to wait on.
      tile::stream_notify(side, team, ops::my_slot_at_peers(ctx, done, {{pull_epoch}}));
      st.pull_used = true;
    }
  }

  ctx.trace("communication enqueued");
  if (overlap) {
    // One rank: nothing to wait for; the GEMM's hooks reduce to a null check per tile.
    const tile::GatherWaitHooks hooks{team, map, world > 1 ? chunk_sig : nullptr,
                                      int32_t(int64_t(me) * a.m_per_rank)};
    ops::run_op_gemm(a.dtype, gathered, a.b, a.c, shape, hooks, plan, gemm_sms, main);
    if (gather) st.side.join(main);
  } else {
    // Decomposed on a shared GPU: the whole gather first, then cuBLAS on the whole GPU (what
    // copy + cuBLAS would do), not the engine on this rank's SM share.
    if (gather) st.side.join(main);
    cublas_gemm();
  }
  ctx.trace("GEMM enqueued");
  copy_out();
}

void ag_gemm(Context& ctx, const AgGemmArgs& a, const AgGemmOptions& o) {
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { ag_gemm_enqueue(ctx, a, o, stream); });
}

}  // namespace tilelink
