// src/ops/sp_attention/sp_attention.cu — sequence-parallel attention: validation, the gather of
// K and V, and the attention kernel over what has arrived.
//
// Per call, on rank r (world W, epoch e — advanced on the device at the start of the call):
//   side stream (after everything before the call on the caller's stream, so this rank's previous
//   kernel is done reading its gathered K and V):
//     copy r's K and V into r's slot of the symmetric gathered K and V, publish those chunks,
//     tell every peer "ready" (my gathered buffers are free for this call)
//     for each peer p in ring order: wait for p's "ready", push r's chunks into p's slot r
//     (copy engine, or the SM gather kernel), publishing each chunk in p's slots
//   caller's stream: the attention kernel over the gathered K and V, on this rank's SM share less
//   what the side stream needs; its key tiles visit r's own shard first, then r+1, r+2, ..., and
//   each waits for the chunks of K and V it reads.
//   join: the caller's stream waits for the side stream.
// Decomposed: NCCL's all-gather of K and V (one GPU per rank), or the same pushes waited for as a
// whole (ranks sharing a GPU), then the kernel with nothing to wait for.
#include "tilelink/ops/sp_attention/sp_attention.hpp"

#include <algorithm>
#include <cmath>

#include "ops/ag_gemm/gather_nvshmem.hpp"
#include "ops/common/op_call.hpp"
#include "ops/common/side_stream.hpp"
#include "ops/common/uniform_check.hpp"
#include "tilelink/attention/fmha_problem.hpp"
#include "tilelink/ops/ag_gemm/gather_kernel.cuh"
#include "tilelink/runtime/nccl.hpp"
#include "tilelink/tile/attention_hooks.cuh"
#include "tilelink/tile/rank_copy.hpp"
#include "tilelink/tile/stream_signal.cuh"

namespace tilelink {
namespace {

constexpr const char* kOp = "sp_attention";

struct SpAttentionState {
  explicit SpAttentionState(Context& ctx) : side(ctx) {}
  ops::SideStream side;
  ops::UniformCheck uniform;
  const void* last_workspace = nullptr;
  const void* zeroed = nullptr;  // the gathered K (and V) last zeroed, when they were new
};

void validate_local(const Context& ctx, const SpAttentionArgs& a, const SpAttentionOptions& o) {
  TL_REQUIRE(a.dtype == DType::bf16 || a.dtype == DType::fp16, kOp, ": unsupported dtype");
  TL_REQUIRE(a.batch >= 1 && a.local_len >= 1, kOp, ": batch and local_len must be positive (got ", a.batch, ", ",
             a.local_len, ", rank ", ctx.rank(), ")");
  TL_REQUIRE(a.q && a.k && a.v && a.out, kOp, ": q, k, v and out must be device pointers (rank ", ctx.rank(), ")");
  TL_REQUIRE(a.sharding == SequenceSharding::contiguous || a.sharding == SequenceSharding::zigzag, kOp,
             ": unknown sharding");
  TL_REQUIRE(a.sharding != SequenceSharding::zigzag || a.local_len % 2 == 0, kOp,
             ": zig-zag sharding holds two chunks per rank, so local_len (", a.local_len, ") must be even");
  const int64_t rows = a.batch * a.local_len;
  TL_REQUIRE(rows * ctx.num_ranks() + attention::kBlockN < INT32_MAX, kOp, ": batch x local_len x ranks = ",
             rows * ctx.num_ranks(), " is too many rows");
  TL_REQUIRE(ctx.num_ranks() * (a.sharding == SequenceSharding::zigzag ? 2 : 1) <= attention::kMaxKvSegments, kOp,
             ": at most ", attention::kMaxKvSegments, " key segments (", ctx.num_ranks(), " ranks)");
  TL_REQUIRE(o.comm_sms >= 0 && o.comm_sms < ctx.sm_count() - 1, kOp, ": comm_sms=", o.comm_sms,
             " must be in [0, ", ctx.sm_count() - 1, ")");
  TL_REQUIRE(o.chunk_rows >= 0, kOp, ": chunk_rows must be >= 0");
  for (const void* p : {a.k, a.v})
    TL_REQUIRE(reinterpret_cast<uintptr_t>(p) % 16 == 0, kOp, ": k and v must be 16-byte aligned");
}

// The kernel's problem: this rank's queries, the gathered keys [W][batch x L][kv_heads x d] seen
// as (row, head, batch) with batch stride L rows, and the segments of positions.
attention::FmhaProblem make_problem(const Context& ctx, const SpAttentionArgs& a, const void* k_all,
                                    const void* v_all) {
  const int w = ctx.num_ranks(), me = ctx.rank();
  const int64_t len = a.local_len, d = a.head_dim, rows_per_rank = a.batch * len;
  attention::FmhaProblem p;
  p.dtype = a.dtype;
  p.q = a.q, p.k = k_all, p.v = v_all, p.o = a.out, p.lse = a.lse;
  p.batch = a.batch, p.q_rows = len, p.kv_rows = w * rows_per_rank;
  p.q_heads = a.q_heads, p.kv_heads = a.kv_heads, p.head_dim = d;
  const int64_t q_strides[3] = {len * a.q_heads * d, a.q_heads * d, d};
  const int64_t kv_strides[3] = {len * a.kv_heads * d, a.kv_heads * d, d};
  std::copy(q_strides, q_strides + 3, p.q_stride);
  std::copy(q_strides, q_strides + 3, p.o_stride);
  std::copy(kv_strides, kv_strides + 3, p.k_stride);
  std::copy(kv_strides, kv_strides + 3, p.v_stride);
  p.causal = a.causal;
  p.scale = a.scale > 0.0f ? a.scale : 1.0f / std::sqrt(float(d));
  if (a.sharding == SequenceSharding::zigzag) {
    const int64_t c = len / 2;
    p.q_segments = 2;
    p.q_segment[0] = {0, c, me * c};
    p.q_segment[1] = {c, c, (2 * w - 1 - me) * c};
    p.kv_segments = 0;
    for (int step = 0; step < w; ++step) {
      const int s = tile::ring_next(me, step, w);
      p.kv_segment[p.kv_segments++] = {s * rows_per_rank, c, s * c};
      p.kv_segment[p.kv_segments++] = {s * rows_per_rank + c, c, (2 * w - 1 - s) * c};
    }
  } else {
    p.q_segments = 1;
    p.q_segment[0] = {0, len, me * len};
    p.kv_segments = 0;
    for (int step = 0; step < w; ++step) {
      const int s = tile::ring_next(me, step, w);
      p.kv_segment[p.kv_segments++] = {s * rows_per_rank, len, s * len};
    }
  }
  return p;
}

int default_chunk_rows(int64_t rows_per_rank, CommEngine engine, int comm_sms, int world) {
  // Copy engine: few large copies (each has microseconds of fixed cost); four per shard so a key
  // tile of a peer can start before the peer's whole shard has landed. SMs: enough chunks to keep
  // every gather block busy.
  const int64_t chunks = engine == CommEngine::copy_engine
                             ? 4
                             : std::max<int64_t>(8, (comm_sms + world - 2) / std::max(1, world - 1));
  return int(std::max<int64_t>(1, (rows_per_rank + chunks - 1) / chunks));
}

}  // namespace

OpPath sp_attention_choose_path(const Context& ctx, const SpAttentionArgs&) {
  // Attention is compute-bound and the gathered K and V are small beside it (2 x L x kv_heads x
  // head_dim per rank against L^2-scale work), so overlapping the gather with the kernel is the
  // whole gain; with one rank there is nothing to gather.
  return ctx.num_ranks() > 1 ? OpPath::fused : OpPath::decomposed;
}

static void sp_attention_enqueue(Context& ctx, const SpAttentionArgs& a, const SpAttentionOptions& o,
                                 cudaStream_t main) {
  validate_local(ctx, a, o);
  auto& st = ctx.op_state<SpAttentionState>(kOp);
  const OpPath path = o.path == OpPath::automatic ? sp_attention_choose_path(ctx, a) : o.path;
  st.uniform.require(ctx, kOp,
                     {{"batch", a.batch}, {"local_len", a.local_len}, {"q_heads", a.q_heads},
                      {"kv_heads", a.kv_heads}, {"head_dim", a.head_dim}, {"dtype", int64_t(a.dtype)},
                      {"causal", a.causal}, {"sharding", int64_t(a.sharding)}, {"path", int64_t(path)},
                      {"engine", int64_t(o.engine)}, {"comm_sms", o.comm_sms}, {"chunk_rows", o.chunk_rows}});
  const int w = ctx.num_ranks(), me = ctx.rank();
  const int64_t elem = int64_t(dtype_size(a.dtype));
  const int64_t rows_per_rank = a.batch * a.local_len;
  const int64_t row_bytes = a.kv_heads * a.head_dim * elem;
  const int64_t shard_bytes = rows_per_rank * row_bytes;

  if (w == 1) {
    // Nothing to gather: the kernel reads K and V where they are ([batch, local_len, ...]: the
    // key tensor has local_len rows, and a last tile's rows past them are outside it, zeros).
    attention::FmhaProblem p = make_problem(ctx, a, a.k, a.v);
    p.kv_rows = a.local_len;
    attention::check_problem(p, kOp);
    ctx.begin_op(kOp);
    attention::launch_fmha(p, attention::NoKvWait{}, main);
    return;
  }

  // The gathered K and V, with a tile of rows past the end: the kernel's last key tile may read
  // up to a tile beyond its segment (masked). Zeroed when new, so rows of a chunk that has not
  // landed hold zeros or an earlier call's keys, never bytes that are not a number.
  const size_t gathered_bytes = size_t((w * rows_per_rank + attention::kBlockN) * row_bytes);
  char* k_all = static_cast<char*>(ctx.symmetric_workspace("sp_attention.k", gathered_bytes));
  char* v_all = static_cast<char*>(ctx.symmetric_workspace("sp_attention.v", gathered_bytes));
  attention::FmhaProblem p = make_problem(ctx, a, k_all, v_all);
  attention::check_problem(p, kOp);

  const bool capturing = ctx.capturing();
  // The copy engine writes into the peers' heaps, which a world over NVSHMEM cannot address, and
  // a captured call has no host-ordered copies: the SM gather then.
  const bool load_store = ctx.peers_load_store();
  const CommEngine engine = capturing || !load_store ? CommEngine::sm : o.engine;
  const int sm_comm = o.comm_sms ? o.comm_sms : std::clamp(ctx.sm_count() / 16, 1, 8);  // gather blocks on SMs
  const int comm_sms = engine == CommEngine::sm ? sm_comm : 0;
  const auto map = tile::RowChunkMapping::make(
      int32_t(rows_per_rank),
      o.chunk_rows ? o.chunk_rows : default_chunk_rows(rows_per_rank, engine, comm_sms, w), w);
  // Slots: "ready" per rank, then K's chunks, then V's. A captured call gathers on SMs, whose
  // chunks may be more than the copy engine's: the slots are sized for either engine, so that a
  // capture after a first uncaptured call of the shape finds them allocated (allocating them is a
  // host collective, which a capture refuses).
  int64_t slot_tiles = map.num_tiles();
  if (o.chunk_rows == 0) {
    slot_tiles = std::max<int64_t>(
        slot_tiles, tile::RowChunkMapping::make(int32_t(rows_per_rank),
                                                default_chunk_rows(rows_per_rank, CommEngine::sm, sm_comm, w), w)
                        .num_tiles());
  }
  uint64_t* signals = ctx.signal_workspace("sp_attention.signals", w + 2 * slot_tiles);
  uint64_t* ready = signals;
  uint64_t* k_sig = signals + w;
  uint64_t* v_sig = k_sig + map.num_tiles();
  // New buffers are zeroed on every rank before any rank pushes into them (collective).
  const bool new_buffers = st.zeroed != k_all;
  if (new_buffers) {
    ctx.refuse_in_capture("allocate its gathered K and V (make one call of this size before capturing)");
    TL_CUDA_CHECK(cudaMemsetAsync(k_all, 0, gathered_bytes, main));
    TL_CUDA_CHECK(cudaMemsetAsync(v_all, 0, gathered_bytes, main));
    st.zeroed = k_all;
  }
  if (!ops::drain_on_new_slots(ctx, st.side, main, signals, st.last_workspace) && new_buffers) {
    ctx.wait_stream(main, kOp);
    ctx.barrier();
  }

  const bool fused = path == OpPath::fused;
  const bool nccl = !fused && ctx.max_ranks_per_gpu() == 1 && !capturing;
  if (nccl) {
    ctx.begin_op(kOp);
    ncclComm_t comm = nccl_comm(ctx);
    nccl_check(ncclGroupStart(), ctx, "ncclGroupStart");
    nccl_check(ncclAllGather(a.k, k_all, size_t(shard_bytes / elem), nccl_type(a.dtype), comm, main), ctx,
               "ncclAllGather (k)");
    nccl_check(ncclAllGather(a.v, v_all, size_t(shard_bytes / elem), nccl_type(a.dtype), comm, main), ctx,
               "ncclAllGather (v)");
    nccl_check(ncclGroupEnd(), ctx, "ncclGroupEnd");
    attention::launch_fmha(p, attention::NoKvWait{}, main);
    return;
  }

  ctx.begin_op(kOp, main);
  // After begin_op: the team's kernels read the call's epoch from the device word it advances.
  const ll::Team team = ctx.team();
  const cudaStream_t side = st.side.get();
  st.side.fork(main);
  const int cpr = map.chunks_per_rank;
  tile::rank_copy_data(side, k_all + me * shard_bytes, a.k, size_t(shard_bytes));
  tile::rank_copy_data(side, v_all + me * shard_bytes, a.v, size_t(shard_bytes));
  // My chunks (for my kernel) and "ready" (for my peers).
  ops::notify_ready(ctx, side, team, ready, {{k_sig + map.tile(me, 0), cpr}, {v_sig + map.tile(me, 0), cpr}});
  if (engine == CommEngine::sm) {
    for (auto [all, local, sig] : {std::tuple{k_all, a.k, k_sig}, std::tuple{v_all, a.v, v_sig}}) {
      const ops::AgGatherParams gp{team, map, all, static_cast<const char*>(local), row_bytes, sig, ready,
                                   CommMode::push};
      if (load_store) {
        ops::ag_gather_kernel<<<comm_sms, ops::kGatherThreads, 0, side>>>(gp);
        TL_CUDA_CHECK(cudaGetLastError());
      } else {
        TL_CUDA_CHECK(ops::launch_ag_gather_nvshmem(gp, comm_sms, side));  // from my rows of `all`
      }
    }
  } else {
    for (int step = 1; step < w; ++step) {
      const int to = tile::ring_prev(me, step, w);
      tile::stream_wait(side, team, ready + to, 1, -1);
      for (int c = 0; c < cpr; ++c) {
        const int32_t t = map.tile(me, c);
        const tile::RowRange rr = map.rows(t);
        const int64_t offset = int64_t(rr.begin) * row_bytes, local = offset - me * shard_bytes;
        const size_t bytes = size_t(rr.count) * row_bytes;
        tile::rank_copy_data(side, ctx.peer_ptr(k_all + offset, to), static_cast<const char*>(a.k) + local, bytes);
        tile::rank_copy_data(side, ctx.peer_ptr(v_all + offset, to), static_cast<const char*>(a.v) + local, bytes);
        tile::stream_notify(side, team, {{ctx.peer_ptr(k_sig + map.notify_slot(t), to)},
                                         {ctx.peer_ptr(v_sig + map.notify_slot(t), to)}});
      }
    }
  }
  ctx.trace("gather enqueued");
  // The side stream's one-block signal kernels (and the gather blocks) need SMs while the
  // persistent attention kernel holds its CTAs: it leaves them one SM, and the gather's.
  p.max_ctas = std::max(1, ctx.sm_count() - 1 - comm_sms);
  if (fused) {
    const tile::GatherKvWait hook{team, map, k_sig, v_sig, a.local_len};
    attention::launch_fmha(p, hook, main);
    st.side.join(main);
  } else {
    tile::stream_wait(side, team, k_sig, map.num_tiles(), -1);
    tile::stream_wait(side, team, v_sig, map.num_tiles(), -1);
    st.side.join(main);
    attention::launch_fmha(p, attention::NoKvWait{}, main);
  }
  ctx.trace("attention enqueued");
}

void sp_attention(Context& ctx, const SpAttentionArgs& a, const SpAttentionOptions& o) {
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { sp_attention_enqueue(ctx, a, o, stream); });
}

}  // namespace tilelink
