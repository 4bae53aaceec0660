// tilelink/runtime/nccl.hpp — the context's NCCL communicator, for the decomposed paths and the
// baselines (GEMM, then an NCCL collective). Created collectively on first use: every rank of the
// world must call nccl_comm() at the same point. NCCL cannot place two ranks on one GPU, so this
// throws when any ranks of the world share a device (ctx.max_ranks_per_gpu() > 1).
#pragma once

#include <nccl.h>

#include "tilelink/core/dtype.hpp"
#include "tilelink/runtime/context.hpp"

namespace tilelink {

ncclComm_t nccl_comm(Context& ctx);
ncclDataType_t nccl_type(DType dtype);
// Throws tilelink::Error naming `what` and the rank unless r == ncclSuccess.
void nccl_check(ncclResult_t r, const Context& ctx, const char* what);

}  // namespace tilelink
