// src/ops/allgather_ll/allgather_ll.cu — see tilelink/ops/allgather_ll/allgather_ll.hpp.
#include "tilelink/ops/allgather_ll/allgather_ll.hpp"

#include "ops/allgather_ll/allgather_ll_call.hpp"

#include <algorithm>

#include "ops/allgather_ll/allgather_ll_kernel.cuh"
#include "ops/common/nvshmem_launch.hpp"
#include "ops/common/op_call.hpp"
#include "ops/common/uniform_check.hpp"

namespace tilelink {
namespace {

constexpr const char* kOp = "allgather_ll";
constexpr int64_t kGranulesPerBlock = 4096;  // 8 per thread: one block per 32 KiB of a message
constexpr int kMaxBlocks = 32;

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
  ctx.wait_stream(stream, "allgather_ll (before growing its buffers)");
  auto* buffers = static_cast<uint64_t*>(ctx.symmetric_workspace("allgather_ll.buffers", bytes));
  TL_CUDA_CHECK(cudaMemsetAsync(buffers, 0, bytes, stream));
  ctx.wait_stream(stream, "allgather_ll (zeroing its buffers)");
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
  const ops::AllgatherLlParams p{ctx.team(), static_cast<const uint2*>(a.in), static_cast<uint2*>(a.out),
                                 st.buffers, granules, st.cap, st.arrivals};
  if (ctx.peers_load_store()) {
    ops::allgather_ll_kernel<ops::LoadStoreSend><<<blocks, ops::kAllgatherLlThreads, 0, stream>>>(p);
    TL_CUDA_CHECK(cudaGetLastError());
  } else {
    TL_CUDA_CHECK(ops::launch_allgather_ll_nvshmem(p, blocks, stream));
  }
  ctx.trace("allgather_ll: launched");
}

}  // namespace ops

void allgather_ll(Context& ctx, const AllgatherLlArgs& a, const AllgatherLlOptions& o) {
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { ops::enqueue_allgather_ll(ctx, kOp, a, o, stream); });
}

}  // namespace tilelink
