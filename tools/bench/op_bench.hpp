// tools/bench/op_bench.hpp — timing fused ops on an in-process world, against baselines, in
// one run: candidates are interleaved (A, B, C, A, B, C, …), each sample is a batch of
// back-to-back calls on every rank, its time is the slowest rank's (CUDA events on each rank's
// stream), and the result is the median over samples after warm-up.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "registry.hpp"
#include "tilelink/ops/common.hpp"
#include "tilelink/runtime/world.hpp"

namespace tilelink::bench {

// One candidate: what every rank calls once per repetition.
struct Candidate {
  std::string name;
  std::function<void(Context&)> call;
};

struct TimingOptions {
  int warmup = 3;    // calls per candidate before sampling
  int samples = 7;   // interleaved samples per candidate (median reported)
  int reps = 3;      // calls per sample
};

// Median ms per call of each candidate (slowest rank per sample).
std::vector<double> time_interleaved(InProcessWorld& world, const std::vector<Candidate>& cands,
                                     const TimingOptions& opt);

double tflops(int64_t m, int64_t n, int64_t k, double ms);

// World sizes to run from --ranks (default: 1 and 8 on one GPU).
std::vector<int> world_sizes(const Args& args);

// A fixed-width table printer that also appends rows to --csv.
class Table {
 public:
  Table(const Args& args, std::vector<std::string> columns);
  ~Table();
  void row(const std::vector<std::string>& cells);

 private:
  std::vector<std::string> cols_;
  FILE* csv_ = nullptr;
};

std::string fmt(double v, int precision = 3);

}  // namespace tilelink::bench
