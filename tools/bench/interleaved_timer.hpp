// tools/bench/interleaved_timer.hpp — the GEMM benchmarks' timing: candidates sampled in turn, each
// sample one CUDA-event-timed block of back-to-back launches (>= 0.5 ms) behind a spin kernel
// (host launch latency stays out of it), rotating over input buffer sets so no candidate runs
// from a warm L2 copy of its own inputs; the median per launch of each candidate.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace tilelink::bench {

using Launch = std::function<void(int set)>;  // one launch on input buffer set `set`

class InterleavedTimer {
 public:
  InterleavedTimer(cudaStream_t stream, int sets);
  ~InterleavedTimer();
  InterleavedTimer(const InterleavedTimer&) = delete;
  InterleavedTimer& operator=(const InterleavedTimer&) = delete;

  // Milliseconds per launch, median over `samples` interleaved blocks, one value per candidate.
  std::vector<double> measure(const std::vector<Launch>& candidates, int samples);

 private:
  double block_ms(const Launch& f, int reps, int& rot);
  int reps_for(const Launch& f, int& rot);
  cudaStream_t stream_;
  int sets_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// The median (the mean of the middle two for an even count; 0 for none).
double median(std::vector<double> v);

}  // namespace tilelink::bench
