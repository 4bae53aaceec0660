// src/ops/gemm_rs/per_rank_gemms.cu — see per_rank_gemms.hpp.
#include "ops/gemm_rs/per_rank_gemms.hpp"

#include "ops/common/side_stream.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <vector>

#include "tilelink/ops/common/reduce_kernels.cuh"
#include "tilelink/tile/order.cuh"
#include "tilelink/tile/rank_copy.hpp"
#include "tilelink/tile/stream_signal.cuh"

namespace tilelink::ops {

void per_rank_gemms_reduce_scatter(Context& ctx, ReduceState& st, const ReduceRequest& r) {
  const int world = ctx.num_ranks(), me = ctx.rank();
  TL_REQUIRE(world <= ll::kMaxLocalRanks, r.op, ": at most ", ll::kMaxLocalRanks, " ranks (peers by load/store)");
  const int64_t rows = r.m / world;
  const size_t esz = dtype_size(r.dtype);
  const size_t block_bytes = size_t(rows * r.n) * esz;
  const std::string op = r.op;
  // recv: slot q holds rank q's partial of this rank's rows (slot me: this rank's own).
  // send: this rank's partials of the peers' rows (slot i: the i+1-th peer in ring order), copied
  // from here into their recv slots.
  char* recv = static_cast<char*>(ctx.symmetric_workspace(op + ".split.recv", world * block_bytes));
  char* send = static_cast<char*>(ctx.symmetric_workspace(op + ".split.send", (world - 1) * block_bytes));
  // ready[q]: rank q's recv slots are free for this call; arrived[q]: rank q's partial is here.
  uint64_t* signals = ctx.signal_workspace(op + ".split.signals", 2 * world);
  uint64_t* ready = signals;
  uint64_t* arrived = signals + world;
  drain_on_new_slots(ctx, st.side, r.stream, signals, st.last_split_signals);
  while (st.computed.size() < size_t(world - 1)) {
    cudaEvent_t e = nullptr;
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    st.computed.push_back(e);
  }

  const cudaStream_t main = r.stream, side = st.side.get();
  ctx.begin_op(r.op, main);
  const ll::Team team = ctx.team();
  // Handshake before the first GEMM: this rank's recv slots are free (its previous call summed
  // them, in stream order); wait until every peer's are.
  tile::stream_notify(main, team, ops::my_slot_at_peers(ctx, ready));
  tile::stream_wait(main, team, ready, world, me);

  // The peers' rows first, in ring order, each pushed by the copy engine while the next GEMM runs.
  st.side.fork(main);
  const char* a = static_cast<const char*>(r.a);
  const size_t a_block_bytes = size_t(rows * r.k) * esz;
  for (int step = 1; step < world; ++step) {
    const int dest = tile::ring_next(me, step, world);
    char* partial = send + (step - 1) * block_bytes;
    ctx.cublas().run(r.dtype, a + dest * a_block_bytes, r.b, partial, rows, r.n, r.k, main);
    TL_CUDA_CHECK(cudaEventRecord(st.computed[step - 1], main));
    TL_CUDA_CHECK(cudaStreamWaitEvent(side, st.computed[step - 1], 0));
    tile::rank_copy_data(side, ctx.peer_ptr(recv + me * block_bytes, dest), partial, block_bytes);
  }
  // Signals after the last copy: a signal kernel queued while cuBLAS holds every SM would wait
  // for the GEMM's end anyway, and nobody needs them before this rank's own GEMM is done.
  tile::stream_notify(side, team, ops::my_slot_at_peers(ctx, arrived));

  // This rank's own rows, then the sum of every rank's partial of them.
  ctx.cublas().run(r.dtype, a + me * a_block_bytes, r.b, recv + me * block_bytes, rows, r.n, r.k, main);
  tile::stream_wait(main, team, arrived, world, me);
  const int blocks = 2 * ctx.sm_count();
  if (r.dtype == DType::bf16)
    sum_slices_kernel<__nv_bfloat16><<<blocks, kReduceThreads, 0, main>>>(
        reinterpret_cast<const __nv_bfloat16*>(recv), world, rows, r.n, static_cast<__nv_bfloat16*>(r.out));
  else
    sum_slices_kernel<__half><<<blocks, kReduceThreads, 0, main>>>(reinterpret_cast<const __half*>(recv), world,
                                                                    rows, r.n, static_cast<__half*>(r.out));
  TL_CUDA_CHECK(cudaGetLastError());
  st.side.join(main);
}

}  // namespace tilelink::ops
