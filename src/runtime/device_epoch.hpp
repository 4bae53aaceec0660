// src/runtime/device_epoch.hpp — the device side of Context::begin_op(op, stream).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tilelink::detail {

// Enqueues `*word += 1` on `stream` (one thread of one block). A kernel, not a host-valued stream
// write, so that a CUDA graph holding it advances the word at every replay.
void enqueue_epoch_advance(uint64_t* word, cudaStream_t stream);

}  // namespace tilelink::detail
