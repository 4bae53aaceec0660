// Checks for CUDA calls made by the runtime, whose messages spell out the arguments:
//   check_cuda(cudaMalloc(&p, n), "cudaMalloc", format_bytes(n), " for the symmetric heap");
//   -> "tilelink rank 2: cudaMalloc(2.00 GiB (...) for the symmetric heap) failed:
//       cudaErrorMemoryAllocation (out of memory)"
#pragma once

#include <cuda_runtime.h>

#include <sstream>

#include "tilelink/core/error.hpp"

namespace tilelink::detail {

inline std::string rank_prefix() {
  const int r = thread_rank();
  return r >= 0 ? "tilelink rank " + std::to_string(r) : std::string("tilelink");
}

template <class... Args>
void check_cuda(cudaError_t err, const char* call, const Args&... args) {
  if (err == cudaSuccess) return;
  std::ostringstream os;
  os << rank_prefix() << ": " << call << "(";
  (os << ... << args);
  os << ") failed: " << cudaGetErrorName(err) << " (" << cudaGetErrorString(err) << ")";
  throw Error(os.str());
}

// Number of visible CUDA devices; throws a plain-spoken error when there is none.
inline int visible_device_count(const char* who) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count < 1) {
    std::ostringstream os;
    os << who << ": no CUDA device is visible";
    if (err != cudaSuccess) os << " (cudaGetDeviceCount: " << cudaGetErrorName(err) << ": "
                               << cudaGetErrorString(err) << ")";
    os << "; tilelink runs on Hopper (sm_90) GPUs";
    cudaGetLastError();  // the failed query must not be blamed on a later call
    throw Error(os.str());
  }
  return count;
}

// A driver API function found through the runtime (nullptr if this driver lacks it): programs
// that link the runtime without a GPU driver (the CPU tests) must not need libcuda.
template <class Fn>
Fn driver_entry_point(const char* name) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check_cuda(cudaGetDriverEntryPointByVersion(name, &entry, 12000, cudaEnableDefault, &found),
             "cudaGetDriverEntryPointByVersion", name);
  return found == cudaDriverEntryPointSuccess ? reinterpret_cast<Fn>(entry) : nullptr;
}

}  // namespace tilelink::detail
