// src/runtime/nccl_comm.cpp — see tilelink/runtime/nccl.hpp.
#include "tilelink/runtime/nccl.hpp"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tilelink/core/error.hpp"

namespace tilelink {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kKey = "runtime.nccl";

// Host polling: a few thousand yields first (collectives of microseconds return at once), then
// short sleeps, so a long GEMM in front of the collective does not spin a core for its duration.
void pause(int round) {
  if (round < 4096) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Waits until `comm`'s pending operation is no longer in progress, at most until `deadline`;
// returns its result, or ncclInProgress when the deadline passed first.
ncclResult_t settle(ncclComm_t comm, Clock::time_point deadline) {
  for (int round = 0;; ++round) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (Clock::now() >= deadline) return ncclInProgress;
    pause(round);
  }
}

Clock::time_point deadline_of(const Context& ctx) {
  return Clock::now() + std::chrono::milliseconds(ctx.host_timeout_ms());
}

struct NcclState {
  explicit NcclState(Context& ctx) : timeout_ms(ctx.host_timeout_ms()) {
    // Checked against the world, not this rank's GPU: with uneven sharing a rank alone on its GPU
    // would otherwise enter ncclCommInitRank while its peers never do.
    TL_REQUIRE(ctx.max_ranks_per_gpu() == 1, "NCCL needs one GPU per rank, but up to ", ctx.max_ranks_per_gpu(),
               " ranks of this world share a GPU (rank ", ctx.rank(), " is on GPU ", ctx.device(), ")");
    ncclUniqueId id{};
    if (ctx.rank() == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) detail::fail("ncclGetUniqueId failed on rank 0: ", ncclGetErrorString(r));
    }
    std::vector<char> all(sizeof(id) * ctx.num_ranks());  // everyone takes rank 0's id
    ctx.allgather(&id, all.data(), sizeof(id));
    std::memcpy(&id, all.data(), sizeof(id));
    TL_CUDA_CHECK(cudaSetDevice(ctx.device()));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&comm, ctx.num_ranks(), id, ctx.rank(), &config);
    if (r == ncclInProgress) r = settle(comm, deadline_of(ctx));
    if (r == ncclSuccess) return;
    if (comm != nullptr) ncclCommAbort(comm);
    comm = nullptr;
    if (r == ncclInProgress)
      detail::fail("ncclCommInitRank did not finish within ", ctx.host_timeout_ms(), " ms on rank ", ctx.rank(),
                   " of ", ctx.num_ranks(), " (a rank did not join); the communicator was aborted");
    detail::fail("ncclCommInitRank failed on rank ", ctx.rank(), ": ", ncclGetErrorString(r));
  }
  ~NcclState() {
    if (comm == nullptr) return;
    // Finalize flushes what the communicator still has to do with its peers; bounded like every
    // other wait, and a communicator that cannot finish is aborted.
    ncclResult_t r = ncclCommFinalize(comm);
    if (r == ncclInProgress) r = settle(comm, Clock::now() + std::chrono::milliseconds(timeout_ms));
    if (r == ncclSuccess) ncclCommDestroy(comm);
    else ncclCommAbort(comm);
  }
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;

  ncclComm_t comm = nullptr;
  uint64_t timeout_ms;
};

// Aborts the context's communicator (its kernels return) and forgets it.
void abort_comm(Context& ctx) {
  if (NcclState* s = ctx.find_op_state<NcclState>(kKey); s != nullptr && s->comm != nullptr) {
    ncclCommAbort(s->comm);
    s->comm = nullptr;
  }
  ctx.drop_op_state(kKey);
}

}  // namespace

ncclComm_t nccl_comm(Context& ctx) { return ctx.op_state<NcclState>(kKey).comm; }

ncclDataType_t nccl_type(DType dtype) { return dtype == DType::bf16 ? ncclBfloat16 : ncclFloat16; }

void nccl_check(ncclResult_t r, Context& ctx, const char* what) {
  if (r == ncclInProgress) {
    NcclState* s = ctx.find_op_state<NcclState>(kKey);
    if (s != nullptr && s->comm != nullptr) r = settle(s->comm, deadline_of(ctx));
    if (r == ncclInProgress) {
      abort_comm(ctx);
      detail::fail(what, " did not finish enqueueing within ", ctx.host_timeout_ms(), " ms on rank ", ctx.rank(),
                   "; the NCCL communicator was aborted");
    }
  }
  if (r != ncclSuccess) detail::fail(what, " failed on rank ", ctx.rank(), ": ", ncclGetErrorString(r));
}

namespace detail {

bool nccl_comm_made(Context& ctx) {
  const NcclState* s = ctx.find_op_state<NcclState>(kKey);
  return s != nullptr && s->comm != nullptr;
}

cudaError_t wait_stream_beside_nccl(Context& ctx, cudaStream_t stream, const char* op) {
  const ncclComm_t comm = ctx.find_op_state<NcclState>(kKey)->comm;
  const Clock::time_point start = Clock::now(), deadline = start + std::chrono::milliseconds(ctx.host_timeout_ms());
  for (int round = 0;; ++round) {
    const cudaError_t done = cudaStreamQuery(stream);
    if (done != cudaErrorNotReady) return done;
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm, &state);
    const bool failed = state != ncclSuccess && state != ncclInProgress;
    if (failed || Clock::now() >= deadline) {
      abort_comm(ctx);
      const cudaError_t after = cudaStreamSynchronize(stream);  // the aborted collectives return
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      if (failed)
        fail("tilelink rank ", ctx.rank(), ": ", op, ": NCCL reported ", ncclGetErrorString(state),
             " while the host waited for the stream; the NCCL communicator was aborted (stream ",
             cudaGetErrorName(after), " after it)");
      fail("tilelink rank ", ctx.rank(), ": ", op, ": the stream did not finish within ", ctx.host_timeout_ms(),
           " ms (the host timeout) with NCCL collectives in flight — a peer did not make the same NCCL call (it "
           "failed, or made another call). The NCCL communicator was aborted (the stream finished ",
           waited, " ms after the wait began, ", cudaGetErrorName(after), "); the next NCCL call makes a new one, "
           "on every rank");
    }
    pause(round);
  }
}

}  // namespace detail

}  // namespace tilelink
