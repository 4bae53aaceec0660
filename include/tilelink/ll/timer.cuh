// tilelink/ll/timer.cuh — clocks and placement, for bounded waits and traces.
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::ll {

#if defined(__CUDACC__)
// Nanoseconds, shared by every SM of the GPU (coarse: updates every ~1 µs on Hopper).
TL_DEVICE uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

TL_DEVICE uint32_t smid() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
#endif

}  // namespace tilelink::ll
