// examples/example_inputs.hpp — what the MPI examples share: inputs that are a pure function of
// their coordinates (so every rank can compute any other rank's data for its host check), and a
// CUDA status check.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "tilelink/core/error.hpp"

namespace example {

// A value in [-1, 1), different for every key (a 64-bit mix of the key's bits).
inline float hashed_value(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return float(key >> 40) / float(1 << 23) - 1.0f;
}

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw tilelink::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace example
