// tilelink/core/error.hpp — one exception type, and checks that say what failed where.
#pragma once

#include <cuda_runtime.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace tilelink {

// Every failure tilelink reports: bad input (before launch), a failed CUDA/MPI/NCCL call, or a
// device-side wait that timed out. The message names the op, the rank and the values involved.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
// Builds a message from streamable parts: fail("ag_gemm: M=", m, " is not divisible by ", w).
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw Error(os.str());
}

[[noreturn]] void fail_cuda(cudaError_t err, const char* call, const char* file, int line);

// The rank the calling host thread works for (-1: none). Worlds set it on every rank's thread so
// that errors raised by TL_CUDA_CHECK deep inside a call still say which rank failed.
void set_thread_rank(int rank);
int thread_rank();
}  // namespace detail

}  // namespace tilelink

// Checks a CUDA runtime call; on failure throws tilelink::Error with the call text and location.
#define TL_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t tl_err_ = (call);                                                  \
    if (tl_err_ != cudaSuccess) ::tilelink::detail::fail_cuda(tl_err_, #call, __FILE__, __LINE__); \
  } while (0)

// Checks a precondition; on failure throws tilelink::Error with the streamed message.
#define TL_REQUIRE(cond, ...)                                   \
  do {                                                          \
    if (!(cond)) ::tilelink::detail::fail(__VA_ARGS__);         \
  } while (0)
