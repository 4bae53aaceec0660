// src/ops/allgather_ll/allgather_ll_call.hpp — allgather_ll as one step of another op's call.
#pragma once

#include <cuda_runtime.h>

#include "tilelink/ops/allgather_ll/allgather_ll.hpp"

namespace tilelink::ops {

// Validates, agrees the size across ranks (the first time), begins the call as `op` (the gather
// kernel is the call's only epoch user: it advances the epoch itself) and launches on `stream`.
// The caller is inside run_op_call.
void enqueue_allgather_ll(Context& ctx, const char* op, const AllgatherLlArgs& args, const AllgatherLlOptions& options,
                          cudaStream_t stream);

}  // namespace tilelink::ops
