// Error plumbing shared by every part of tilelink: CUDA failures and the rank tag of a thread.
#include "tilelink/core/error.hpp"

namespace tilelink::detail {

namespace {
thread_local int g_thread_rank = -1;
}

void set_thread_rank(int rank) { g_thread_rank = rank; }
int thread_rank() { return g_thread_rank; }

void fail_cuda(cudaError_t err, const char* call, const char* file, int line) {
  std::ostringstream os;
  os << "tilelink";
  if (g_thread_rank >= 0) os << " rank " << g_thread_rank;
  os << ": CUDA call " << call << " failed: " << cudaGetErrorName(err) << " ("
     << cudaGetErrorString(err) << ") at " << file << ":" << line;
  throw Error(os.str());
}

}  // namespace tilelink::detail
