// tilelink-bench: keeps a stream busy for about `microseconds` (gpu_spin.cu), launched before a
// timed sample's start event so the events time GPU work, not the host's launch latency.
#pragma once

#include <cuda_runtime.h>

namespace tilelink::bench {

void gpu_spin(cudaStream_t stream, int microseconds);

}  // namespace tilelink::bench
