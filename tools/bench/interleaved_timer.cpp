// tools/bench/interleaved_timer.cpp — see interleaved_timer.hpp.
#include "bench/interleaved_timer.hpp"

#include <algorithm>
#include <cmath>

#include "bench/gpu_spin.hpp"
#include "tilelink/core/error.hpp"

namespace tilelink::bench {

InterleavedTimer::InterleavedTimer(cudaStream_t stream, int sets) : stream_(stream), sets_(std::max(1, sets)) {
  TL_CUDA_CHECK(cudaEventCreate(&start_));
  TL_CUDA_CHECK(cudaEventCreate(&stop_));
}

InterleavedTimer::~InterleavedTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

double InterleavedTimer::block_ms(const Launch& f, int reps, int& rot) {
  // GPU busy while the host enqueues the block: host launch latency (which differs between
  // candidates) stays out of it.
  gpu_spin(stream_, 100 + 50 * reps);
  TL_CUDA_CHECK(cudaEventRecord(start_, stream_));
  for (int i = 0; i < reps; ++i) f(rot++ % sets_);
  TL_CUDA_CHECK(cudaEventRecord(stop_, stream_));
  TL_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  TL_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return double(ms) / reps;
}

int InterleavedTimer::reps_for(const Launch& f, int& rot) {
  for (int i = 0; i < 3; ++i) f(rot++ % sets_);  // warm-up (a first launch sets attributes)
  const double t = block_ms(f, 2, rot);
  return std::max(1, int(std::ceil(0.5 / std::max(t, 1e-3))));
}

std::vector<double> InterleavedTimer::measure(const std::vector<Launch>& candidates, int samples) {
  int rot = 0;
  std::vector<int> reps;
  for (const auto& c : candidates) reps.push_back(reps_for(c, rot));
  std::vector<std::vector<double>> v(candidates.size());
  for (int s = 0; s < samples; ++s)
    for (size_t i = 0; i < candidates.size(); ++i) v[i].push_back(block_ms(candidates[i], reps[i], rot));
  std::vector<double> med;
  for (auto& x : v) med.push_back(median(x));
  return med;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tilelink::bench
