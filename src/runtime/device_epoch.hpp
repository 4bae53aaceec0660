// src/runtime/device_epoch.hpp — the device side of Context::begin_op(op, stream).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::detail {

// Enqueues the advance of the device epoch word team.epoch_word to ll::next_device_epoch(team)
// on `stream` (one thread of one block). A kernel, not a host-valued stream write, so that a CUDA
// graph holding it advances the word at every replay.
void enqueue_epoch_advance(const ll::Team& team, cudaStream_t stream);

// Enqueues the abort of this rank's current call on every rank, marked as refused by this rank
// (Context::abandon_call); with `advance`, first advances the device epoch (the call had not
// begun). `team` must carry the device epoch word.
void enqueue_refused_call_abort(const ll::Team& team, bool advance, cudaStream_t stream);

}  // namespace tilelink::detail
