// src/ops/common/failure_report.hpp — an op call that fails after the device failed says why.
//
// A bounded wait that times out ends its kernel, and with it the CUDA context of the process: on
// a GPU shared by in-process ranks, every other rank's next CUDA call or cuBLAS call then fails
// with a message about itself ("cublasGemmEx failed: status 14"). Whichever rank's error reaches
// the user first, it should name the wait that timed out and where each rank's host was, which
// Context::raise collects.
#pragma once

#include <cuda_runtime.h>

#include "tilelink/runtime/context.hpp"
#include "tilelink/runtime/error.hpp"

namespace tilelink::ops {

template <class Body>
void reporting_device_failures(Context& ctx, const char* op, Body&& body) {
  try {
    body();
  } catch (const Error&) {
    cudaError_t device = cudaPeekAtLastError();
    if (device == cudaSuccess) device = cudaStreamQuery(ctx.stream());
    if (device != cudaSuccess && device != cudaErrorNotReady) ctx.raise(op, device);
    throw;  // the device is fine: the error is about this call's input or host state
  }
}

}  // namespace tilelink::ops
