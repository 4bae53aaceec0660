// src/ops/allgather_ll/allgather_ll.cu — see tilelink/ops/allgather_ll/allgather_ll.hpp.
#include "tilelink/ops/allgather_ll/allgather_ll.hpp"

#include "ops/allgather_ll/allgather_ll_call.hpp"

#include <algorithm>

#include "ops/common/op_call.hpp"
#include "ops/common/uniform_check.hpp"
#include "tilelink/tile/flagged.cuh"
#include "tilelink/tile/kernel_call.cuh"

namespace tilelink {
namespace {

constexpr const char* kOp = "allgather_ll";
constexpr int kThreads = 512;
constexpr int64_t kGranulesPerBlock = 4096;  // 8 per thread: one block per 32 KiB of a message
constexpr int kMaxBlocks = 32;

// Receive buffers: two (by epoch parity), each one slot per source rank of `cap` granules (16
// bytes each). The layout follows the workspace's capacity, not the call's size, so a call never
// writes where a slow peer may still read an earlier, larger call of the other parity.
// The call is this one kernel: it advances the device epoch itself (tile/kernel_call.cuh).
__global__ void __launch_bounds__(kThreads)
    allgather_ll_kernel(const ll::Team call_team, const uint2* in, uint2* out, uint64_t* buffers, int64_t granules,
                        int64_t cap, uint64_t* arrivals) {
  const ll::Team team = tile::begin_kernel_call(call_team);
  const uint64_t epoch = team.epoch;
  const uint32_t flag = uint32_t(epoch);
  const int me = team.rank, w = team.num_ranks;
  uint64_t* recv = buffers + int64_t(epoch & 1) * w * 2 * cap;
  const int64_t per_block = (granules + gridDim.x - 1) / gridDim.x;
  const int64_t g0 = std::min<int64_t>(granules, blockIdx.x * per_block);
  const int64_t g1 = std::min<int64_t>(granules, g0 + per_block);
  // Send first (this block never waits before its data is on the way), nearest peer first.
  for (int step = 1; step < w; ++step)
    tile::put_flagged(tile::Block{}, team, recv + int64_t(me) * 2 * cap, in, g0, g1, flag, (me + step) % w);
  uint2* mine = out + int64_t(me) * granules;
  for (int64_t g = g0 + threadIdx.x; g < g1; g += blockDim.x) mine[g] = in[g];
  for (int step = 1; step < w; ++step) {
    const int from = (me - step + w) % w;
    tile::get_flagged(tile::Block{}, team, recv + int64_t(from) * 2 * cap, out + int64_t(from) * granules, g0, g1,
                      flag, tile::WaitSite{from, "allgather_ll"});
  }
  tile::end_kernel_call(tile::Block{}, call_team, epoch, arrivals);
}

struct AllgatherLlState {
  explicit AllgatherLlState(Context&) {}
  ops::UniformCheck uniform;
  uint64_t* buffers = nullptr;
  int64_t cap = 0;  // granules per source rank and parity
  uint64_t* arrivals = nullptr;  // the kernel's count of finished blocks (tile::end_kernel_call)
};

void validate(const Context& ctx, const AllgatherLlArgs& a, const AllgatherLlOptions& o) {
  TL_REQUIRE(a.in != nullptr && a.out != nullptr, kOp, ": in and out must be device pointers (rank ", ctx.rank(),
             ")");
  TL_REQUIRE(a.bytes > 0 && a.bytes % 8 == 0, kOp, ": bytes=", a.bytes, " must be a positive multiple of 8");
  TL_REQUIRE(a.bytes <= kAllgatherLlMaxBytes, kOp, ": bytes=", a.bytes, " per rank is over the low-latency "
             "protocol's limit of ", kAllgatherLlMaxBytes, " (use NCCL's all-gather for large messages)");
  TL_REQUIRE(reinterpret_cast<uintptr_t>(a.in) % 8 == 0 && reinterpret_cast<uintptr_t>(a.out) % 8 == 0, kOp,
             ": in and out must be 8-byte aligned");
  TL_REQUIRE(o.blocks >= 0 && o.blocks <= ctx.sm_count(), kOp, ": blocks=", o.blocks, " must be in [0, ",
             ctx.sm_count(), "] (this rank's SM share)");
}

// The buffers for `granules` per rank; when they are new or grew (collective: same size on every
// rank), zeroes them once every rank's earlier calls are done, and lets no rank write into them
// before every rank zeroed its own.
void ensure_buffers(Context& ctx, AllgatherLlState& st, int64_t granules, cudaStream_t stream) {
  if (granules <= st.cap) return;
  const int64_t w = ctx.num_ranks();
  const size_t bytes = size_t(2 * w * 2 * granules) * sizeof(uint64_t);
  // Earlier calls on this rank are done (the stream waits for the previous call, CallOrder), and
  // with them every peer's writes into this rank's old buffers (this rank read them all).
  TL_CUDA_CHECK(cudaStreamSynchronize(stream));
  auto* buffers = static_cast<uint64_t*>(ctx.symmetric_workspace("allgather_ll.buffers", bytes));
  TL_CUDA_CHECK(cudaMemsetAsync(buffers, 0, bytes, stream));
  TL_CUDA_CHECK(cudaStreamSynchronize(stream));
  ctx.barrier();
  st.buffers = buffers;
  st.cap = granules;
}

}  // namespace

namespace ops {

void enqueue_allgather_ll(Context& ctx, const char* op, const AllgatherLlArgs& a, const AllgatherLlOptions& o,
                          cudaStream_t stream) {
  validate(ctx, a, o);
  auto& st = ctx.op_state<AllgatherLlState>(kOp);
  st.uniform.require(ctx, kOp, {{"bytes", a.bytes}, {"blocks", o.blocks}});
  const int64_t granules = a.bytes / 8;
  if (ctx.num_ranks() == 1) {
    ctx.begin_op(op);
    TL_CUDA_CHECK(cudaMemcpyAsync(a.out, a.in, size_t(a.bytes), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  ensure_buffers(ctx, st, granules, stream);
  if (st.arrivals == nullptr) st.arrivals = ctx.signal_workspace("allgather_ll.arrivals", 1);
  const int blocks = o.blocks > 0 ? o.blocks
                                  : int(std::clamp<int64_t>((granules + kGranulesPerBlock - 1) / kGranulesPerBlock,
                                                            1, std::min(kMaxBlocks, ctx.sm_count())));
  ctx.begin_op_in_kernel(op);
  ctx.trace("allgather_ll: checked, buffers ready");
  allgather_ll_kernel<<<blocks, kThreads, 0, stream>>>(ctx.team(), static_cast<const uint2*>(a.in),
                                                       static_cast<uint2*>(a.out), st.buffers, granules, st.cap,
                                                       st.arrivals);
  TL_CUDA_CHECK(cudaGetLastError());
  ctx.trace("allgather_ll: launched");
}

}  // namespace ops

void allgather_ll(Context& ctx, const AllgatherLlArgs& a, const AllgatherLlOptions& o) {
  ops::require_load_store_peers(ctx, kOp);
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { ops::enqueue_allgather_ll(ctx, kOp, a, o, stream); });
}

}  // namespace tilelink
