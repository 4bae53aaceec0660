// tilelink/core/kernel_smem.hpp — letting a kernel use more than 48 KiB of dynamic shared memory.
//
// The limit is a function attribute, and an attribute belongs to one device's context: it must be
// raised on every device the kernel runs on. The call may wait for the device, so it must not run
// inside an op call while other ranks' kernels on the same GPU spin on this rank's signals: kernels
// that ops launch raise it in a setup that a Context runs when it is created
// (gemm::detail::register_kernel_setup), and again, as a fallback, at a launch on a device that was
// not prepared (a no-op after the first time).
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "tilelink/core/error.hpp"

namespace tilelink::detail {

// Once per device and kernel (the cache belongs to the instantiation for `kernel`).
template <auto kernel>
void allow_dynamic_smem(int device, int bytes) {
  constexpr int kMaxDevices = 64;
  static std::atomic<bool> allowed[kMaxDevices];
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && allowed[device].load()) return;
  TL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (cached) allowed[device].store(true);
}

}  // namespace tilelink::detail
