// src/ops/common/side_stream.hpp — the second stream a fused op runs its communication on.
//
// fork(): the side stream waits for everything issued so far on the caller's stream (so the
// previous call's GEMM is done before its buffers are refilled); join(): the caller's stream waits
// for the side stream, so the op is complete, in stream order, when the caller's stream says so.
#pragma once

#include <cuda_runtime.h>

#include "tilelink/runtime/context.hpp"
#include "tilelink/runtime/error.hpp"

namespace tilelink::ops {

class SideStream {
 public:
  explicit SideStream(Context& ctx) {
    TL_CUDA_CHECK(cudaSetDevice(ctx.device()));
    // Default priority: every rank's kernels fit in its SM share, so communication needs no
    // precedence to make progress, and one priority class keeps the hardware-queue mapping simple.
    TL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming));
  }
  ~SideStream() {
    cudaEventDestroy(joined_);
    cudaEventDestroy(forked_);
    cudaStreamDestroy(stream_);
  }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t get() const { return stream_; }
  void fork(cudaStream_t from) {
    TL_CUDA_CHECK(cudaEventRecord(forked_, from));
    TL_CUDA_CHECK(cudaStreamWaitEvent(stream_, forked_, 0));
  }
  void join(cudaStream_t into) {
    TL_CUDA_CHECK(cudaEventRecord(joined_, stream_));
    TL_CUDA_CHECK(cudaStreamWaitEvent(into, joined_, 0));
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t forked_ = nullptr, joined_ = nullptr;
};

}  // namespace tilelink::ops
