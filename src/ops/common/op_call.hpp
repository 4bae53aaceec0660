// src/ops/common/op_call.hpp — what every op call does around its body: pick its stream, order it
// after the context's previous call, note whether it is being captured into a CUDA graph, and
// explain a failure that follows a device fault.
//
// Ops of one context share the side stream, the symmetric workspaces and the signal slots, so a
// call must begin after the previous call of the context ended — also when the caller switched
// streams between them (the second stream then waits for an event the first call recorded).
// A captured call is ordered by the graph's launches instead: capture and replay happen in the
// caller's stream order (PyTorch's graph capture makes its stream wait for the current one), and
// an event recorded outside a capture cannot be waited on inside it, nor the other way round.
//
// A bounded wait that times out aborts the call's kernels on every rank without a trap, and the
// host raises that at the next synchronize. What remains here is a real device fault (which
// does end the CUDA context: on a GPU shared by in-process ranks, every other rank's next CUDA or
// cuBLAS call then fails with a message about itself). Whichever rank's error reaches the user
// first, it should name any wait that timed out and where each rank's host was, which
// Context::raise collects.
#pragma once

#include <cuda_runtime.h>

#include <optional>

#include "tilelink/runtime/context.hpp"
#include "tilelink/core/error.hpp"
#include "tilelink/core/stream_capture.hpp"

namespace tilelink::ops {

class CallOrder {
 public:
  explicit CallOrder(Context& ctx) {
    TL_CUDA_CHECK(cudaSetDevice(ctx.device()));
    TL_CUDA_CHECK(cudaEventCreateWithFlags(&ended_, cudaEventDisableTiming));
  }
  ~CallOrder() { cudaEventDestroy(ended_); }
  CallOrder(const CallOrder&) = delete;
  CallOrder& operator=(const CallOrder&) = delete;

  void begin(cudaStream_t stream) {
    if (last_.has_value() && *last_ != stream) TL_CUDA_CHECK(cudaStreamWaitEvent(stream, ended_, 0));
  }
  void end(cudaStream_t stream) {
    TL_CUDA_CHECK(cudaEventRecord(ended_, stream));
    last_ = stream;
  }

 private:
  cudaEvent_t ended_ = nullptr;
  std::optional<cudaStream_t> last_;  // stream of the latest call (none yet: unset)
};

// Runs body(stream) for one call of `op` on `requested` (unset: ctx.stream()).
template <class Body>
void run_op_call(Context& ctx, const char* op, std::optional<cudaStream_t> requested, Body&& body) {
  const cudaStream_t stream = requested.value_or(ctx.stream());
  auto& order = ctx.op_state<CallOrder>("ops.call_order");
  const bool captured = tilelink::detail::stream_capturing(stream);
  struct CaptureScope {
    Context& ctx;
    ~CaptureScope() { ctx.set_capturing(nullptr); }
  } scope{ctx};
  ctx.set_capturing(captured ? op : nullptr);
  const uint64_t epoch_before = ctx.epoch();
  try {
    if (!captured) order.begin(stream);
    body(stream);
    if (!captured) order.end(stream);
  } catch (const Error&) {
    cudaError_t device = cudaPeekAtLastError();
    // Querying a stream under capture would invalidate the capture.
    if (device == cudaSuccess && !captured) device = cudaStreamQuery(stream);
    if (device != cudaSuccess && device != cudaErrorNotReady) ctx.raise(op, device);
    // The device is fine: the error is about this call's input or host state, and the peers may
    // be making the call (their checks of a call shape they have seen need no collective). Keep
    // the epochs in step and end their call at once rather than at their wait bound.
    try {
      ctx.abandon_call(op, stream, ctx.epoch() != epoch_before);
      if (!captured) order.end(stream);
    } catch (const Error&) {
      // Reporting the call's own error matters more than this one.
    }
    throw;
  }
}

}  // namespace tilelink::ops
