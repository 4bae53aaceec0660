// tilelink/core/stream_capture.hpp — whether a stream is capturing a CUDA graph.
//
// Work issued to a capturing stream is recorded, not run: host code that would wait for it
// (timing, a host round trip) or order it with events recorded outside the capture must tell.
#pragma once

#include <cuda_runtime.h>

#include "tilelink/core/error.hpp"

namespace tilelink::detail {

// Whether work issued to `stream` now is being captured into a CUDA graph (an invalidated
// capture counts: it is still capturing until it ends).
inline bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TL_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace tilelink::detail
