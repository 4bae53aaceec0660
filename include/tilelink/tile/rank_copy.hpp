// tilelink/tile/rank_copy.hpp — the copy-engine side of the tile layer (host, stream-ordered).
//
//   rank_copy_data(stream, dst, src, bytes)       bulk copy on the copy engine (any ranks' memory
//                                                 mapped here: local, peer, IPC)
//   rank_signal_set(stream, slot, value)           stream-ordered release of a signal word (the
//                                                 driver fences before the write), local or peer
//   rank_signals_set(stream, slots, count, value)  the same for many words as one stream operation
//
// Paired with the SM-side waits these give the copy engine the same signal protocol as the SMs: a
// chunk copied by the copy engine is published by the write that follows it. The two signal
// writes take their value from the host, so they suit calls begun on the host alone
// (Context::begin_op(op)); op calls, whose epoch lives on the device so that CUDA graphs can
// replay them, use tile::stream_notify and tile::stream_wait (stream_signal.cuh).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tilelink/core/error.hpp"

namespace tilelink::tile {

namespace detail {
inline void check_cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* msg = nullptr;
    cuGetErrorString(r, &msg);
    ::tilelink::detail::fail(what, " failed: ", msg ? msg : "unknown driver error");
  }
}
}  // namespace detail

inline void rank_copy_data(cudaStream_t stream, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  TL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
}

inline void rank_signal_set(cudaStream_t stream, uint64_t* slot, uint64_t value) {
  detail::check_cu(cuStreamWriteValue64(stream, reinterpret_cast<CUdeviceptr>(slot), value,
                                        CU_STREAM_WRITE_VALUE_DEFAULT),
                   "cuStreamWriteValue64 (rank_signal_set)");
}

// Separate writes queue behind each other on the stream, each with microseconds of latency on the
// path to the waiting GEMM; cuStreamBatchMemOp issues up to 255 of them as one operation.
inline void rank_signals_set(cudaStream_t stream, uint64_t* const* slots, size_t count, uint64_t value) {
  constexpr size_t kMaxBatch = 255;  // the driver's limit: count < 256
  std::vector<CUstreamBatchMemOpParams> ops;
  for (size_t first = 0; first < count; first += kMaxBatch) {
    const size_t n = std::min(kMaxBatch, count - first);
    ops.assign(n, CUstreamBatchMemOpParams{});
    for (size_t i = 0; i < n; ++i) {
      ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
      ops[i].writeValue.address = reinterpret_cast<CUdeviceptr>(slots[first + i]);
      ops[i].writeValue.value64 = value;
      ops[i].writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
    }
    detail::check_cu(cuStreamBatchMemOp(stream, unsigned(n), ops.data(), 0), "cuStreamBatchMemOp (rank_signals_set)");
  }
}

}  // namespace tilelink::tile
