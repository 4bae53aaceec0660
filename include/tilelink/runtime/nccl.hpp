// tilelink/runtime/nccl.hpp — the context's NCCL communicator, for the decomposed paths and the
// baselines (GEMM, then an NCCL collective). Created collectively on first use: every rank of the
// world must call nccl_comm() at the same point. NCCL cannot place two ranks on one GPU, so this
// throws when any ranks of the world share a device (ctx.max_ranks_per_gpu() > 1).
//
// Every host wait on it is bounded by the context's host timeout (Context::host_timeout_ms): the
// communicator is non-blocking, so creating it, enqueueing a collective and waiting for a stream
// with collectives in flight (Context::wait_stream) poll with a deadline instead of blocking in
// NCCL. Past the deadline the communicator is aborted (its kernels return, whatever the peers
// do), the call throws tilelink::Error, and the next nccl_comm() makes a new one, collectively.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "tilelink/core/dtype.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink {

ncclComm_t nccl_comm(Context& ctx);
ncclDataType_t nccl_type(DType dtype);
// Checks the result of an NCCL call on the context's communicator: an enqueue the non-blocking
// communicator has not finished (ncclInProgress) is waited for, bounded; then throws
// tilelink::Error naming `what` and the rank unless it succeeded.
void nccl_check(ncclResult_t r, Context& ctx, const char* what);

namespace detail {
// Whether the context made a communicator (and may have collectives in flight); nothing
// collective, nothing created.
bool nccl_comm_made(Context& ctx);
// Context::wait_stream once the context has a communicator: polls `stream` until it is done, the
// communicator reports an error, or the host timeout passes; aborts the communicator on either
// of the last two, waits for the stream (the collectives have returned), and throws naming `op`.
cudaError_t wait_stream_beside_nccl(Context& ctx, cudaStream_t stream, const char* op);
}  // namespace detail

}  // namespace tilelink
