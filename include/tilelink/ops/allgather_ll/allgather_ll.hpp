// tilelink/ops/allgather_ll/allgather_ll.hpp — AllGather for small messages, at the latency of one
// NVLink write.
//
//   out[W * bytes] = concat over ranks r of in_r[bytes]      on every rank
//
// Built for 1 KB – 1 MB per rank (decode-time partial results, routing tables, scales): every
// rank writes its data straight into every peer's receive buffer as flagged words (data and flag
// in one store, tile/flagged.cuh), and every rank polls its buffer for the words of the current
// call and copies them out — one kernel, no separate signal or fence per message, no reset between
// calls (flags are the call's epoch, and two buffers alternate by its parity). Capturable in a
// CUDA graph once a call of that size ran outside the capture. Larger messages belong to NCCL or
// the GEMM ops' gathers: the flagged words double the bytes on the wire.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "tilelink/runtime/context.hpp"

namespace tilelink {

struct AllgatherLlArgs {
  const void* in = nullptr;  // [bytes], any device memory of this rank, 8-byte aligned
  void* out = nullptr;       // [num_ranks * bytes], any device memory, 8-byte aligned
  int64_t bytes = 0;         // per rank, a multiple of 8, the same on every rank
};

struct AllgatherLlOptions {
  int blocks = 0;  // thread blocks of the kernel (0: one per 64 KiB per peer, up to 32)
  // The stream the call runs on (unset: ctx.stream()). A context's calls run one after another
  // whatever their streams.
  std::optional<cudaStream_t> stream;
};

// Largest `bytes` per rank (the receive buffers take 4 x num_ranks x bytes of symmetric heap).
inline constexpr int64_t kAllgatherLlMaxBytes = int64_t(8) << 20;

void allgather_ll(Context& ctx, const AllgatherLlArgs& args, const AllgatherLlOptions& options = {});

}  // namespace tilelink
