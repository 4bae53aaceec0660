// Plain-GEMM tuning (tilelink/gemm/tuning.hpp): the rule's first plans timed on the device,
// interleaved, and the switch that turns it on (the table of tuned plans: tuned_plans.cpp).
#include "tilelink/gemm/tuning.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <vector>

#include "../runtime/options.hpp"
#include "tilelink/core/error.hpp"
#include "tilelink/core/stream_capture.hpp"

namespace tilelink::gemm {
namespace {

// A timed block of launches lasts at least this long, so that event resolution and launch gaps
// stay small beside it; at most kMaxReps launches (a block of 5-us GEMMs is then ~0.3 ms).
constexpr double kBlockUs = 200.0;
constexpr int kMaxReps = 64;

class Events {
 public:
  explicit Events(size_t n) : ev_(n, nullptr) {
    for (auto& e : ev_) TL_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~Events() {
    for (auto e : ev_)
      if (e) (void)cudaEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](size_t i) const { return ev_[i]; }

 private:
  std::vector<cudaEvent_t> ev_;
};

// A block of `reps` launches of one plan, captured as a CUDA graph (on a stream of its own: the
// caller's may be the legacy default stream, which cannot capture). Launched with one call, its
// kernels run back to back: the host's cost per gemm() call, several microseconds and as long as
// a small GEMM's kernel, is then not what is timed (launched one by one, the GPU waited on the
// host between them and every plan timed alike). Where the driver refuses the capture the block
// stays empty and tuning times call by call, as before.
class LaunchBlock {
 public:
  template <class Launch>
  LaunchBlock(int reps, Launch launch) {
    cudaStream_t capture = nullptr;
    TL_CUDA_CHECK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
    bool launched = true;
    if (cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      try {
        for (int i = 0; i < reps; ++i) launch(capture);
      } catch (const std::exception&) {
        launched = false;  // refused under capture; timed call by call, real faults surface there
      }
      const cudaError_t ended = cudaStreamEndCapture(capture, &graph_);
      if (launched && ended == cudaSuccess && graph_) {
        if (cudaGraphInstantiate(&exec_, graph_, 0) != cudaSuccess) exec_ = nullptr;
      }
    }
    (void)cudaStreamDestroy(capture);
    (void)cudaGetLastError();  // a refused capture's error is not the caller's
  }
  ~LaunchBlock() {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
  }
  LaunchBlock(const LaunchBlock&) = delete;
  LaunchBlock& operator=(const LaunchBlock&) = delete;
  bool captured() const { return exec_ != nullptr; }
  void launch(cudaStream_t stream) const { TL_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::atomic<int>& tuning_flag() {  // -1: not read from the environment yet
  static std::atomic<int> flag{-1};
  return flag;
}

}  // namespace

GemmTuneResult tune_plain_gemm(DType dtype, const void* A, const void* B, void* D, const GemmShape& shape,
                               int sm_budget, cudaStream_t stream, const GemmTuning& tuning) {
  TL_REQUIRE(tuning.samples >= 1, "gemm tuning: samples (", tuning.samples, ") must be at least 1");
  TL_REQUIRE(!tilelink::detail::stream_capturing(stream),
             "gemm tuning: the stream is capturing a CUDA graph; tune before capture");
  validate(packed(shape), A, B, D, "gemm tuning");
  GemmTuneResult r;
  r.plans = tuning_plans(shape, sm_budget, tuning);
  const size_t n = r.plans.size();
  r.us.assign(n, 0.0);
  if (n == 1) return r;
  const auto launch_on = [&](size_t c, cudaStream_t s) { gemm(dtype, A, B, D, shape, &r.plans[c], sm_budget, s); };
  const auto launch = [&](size_t c, int reps) {
    for (int i = 0; i < reps; ++i) launch_on(c, stream);
  };
  // One untimed launch of each (sets its kernel up on the device), then one timed one: the
  // estimate that sizes the blocks.
  Events est(2 * n);
  for (size_t c = 0; c < n; ++c) launch(c, 1);
  for (size_t c = 0; c < n; ++c) {
    TL_CUDA_CHECK(cudaEventRecord(est[2 * c], stream));
    launch(c, 1);
    TL_CUDA_CHECK(cudaEventRecord(est[2 * c + 1], stream));
  }
  TL_CUDA_CHECK(cudaEventSynchronize(est[2 * n - 1]));
  float slowest_ms = 0.0f;
  for (size_t c = 0; c < n; ++c) {
    float ms = 0.0f;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, est[2 * c], est[2 * c + 1]));
    slowest_ms = std::max(slowest_ms, ms);
  }
  const int reps = std::clamp(int(std::ceil(kBlockUs / std::max(1.0, 1000.0 * slowest_ms))), 1, kMaxReps);
  std::vector<std::unique_ptr<LaunchBlock>> block_of(n);
  r.from_graphs = true;  // every plan's block captured, or none timed from graphs: alike for all
  for (size_t c = 0; c < n && r.from_graphs; ++c) {
    block_of[c] = std::make_unique<LaunchBlock>(reps, [&](cudaStream_t s) { launch_on(c, s); });
    r.from_graphs = block_of[c]->captured();
  }
  // Blocks of `reps` launches, the candidates interleaved so that clocks and neighbours drift
  // alike for all of them.
  const size_t blocks = n * size_t(tuning.samples);
  Events ev(2 * blocks);
  for (size_t b = 0; b < blocks; ++b) {
    TL_CUDA_CHECK(cudaEventRecord(ev[2 * b], stream));
    if (r.from_graphs) {
      block_of[b % n]->launch(stream);
    } else {
      launch(b % n, reps);
    }
    TL_CUDA_CHECK(cudaEventRecord(ev[2 * b + 1], stream));
  }
  TL_CUDA_CHECK(cudaEventSynchronize(ev[2 * blocks - 1]));
  std::vector<std::vector<double>> per(n);
  for (size_t b = 0; b < blocks; ++b) {
    float ms = 0.0f;
    TL_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * b], ev[2 * b + 1]));
    per[b % n].push_back(1000.0 * ms / reps);
  }
  for (size_t c = 0; c < n; ++c) {
    r.us[c] = median(per[c]);
    // The rule's order breaks ties: a later plan must be faster by more than timing noise.
    if (r.us[c] < r.us[size_t(r.best)] * 0.99) r.best = int(c);
  }
  return r;
}

void set_plain_gemm_tuning(bool on) { tuning_flag().store(on ? 1 : 0); }

bool plain_gemm_tuning() {
  int f = tuning_flag().load();
  if (f < 0) {
    const int from_env = detail::tuning_requested(std::getenv("TILELINK_GEMM_TUNE")) ? 1 : 0;
    tuning_flag().compare_exchange_strong(f, from_env);  // an explicit setting made meanwhile wins
    f = tuning_flag().load();
  }
  return f == 1;
}

namespace detail {

bool tuning_requested(const char* env_text) {
  return env_text && *env_text &&
         parse_env_integer("TILELINK_GEMM_TUNE", env_text, 0, 1, "0 (off) or 1 (tune plain GEMMs)") == 1;
}

}  // namespace detail
}  // namespace tilelink::gemm
