// tools/bench/op_bench.hpp — timing fused ops on an in-process world, against baselines, in
// one run: candidates are interleaved (A, B, C, A, B, C, …), each sample is a batch of
// back-to-back calls on every rank, its time is the slowest rank's (CUDA events on each rank's
// stream), and the result is the median over samples after warm-up.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu_spin.hpp"
#include "registry.hpp"
#include "tilelink/ops/common.hpp"
#include "tilelink/runtime/world.hpp"

namespace tilelink::bench {

// The ranks a benchmark runs on: an in-process world of `ranks` ranks (default), or with --mpi
// this process's rank of the MPI job (mpirun -np N; one GPU per process). run(fn) calls fn(ctx)
// on every rank this process holds; print only where is_root().
class BenchWorld {
 public:
  BenchWorld(const Args& args, int ranks, const WorldOptions& options);
  ~BenchWorld();
  int size() const;
  bool is_root() const;
  void run(const std::function<void(Context&)>& fn);

 private:
  std::unique_ptr<InProcessWorld> in_process_;
  std::unique_ptr<MpiWorld> mpi_;
};

class Table;

// One candidate: what every rank calls once per repetition.
struct Candidate {
  std::string name;
  std::function<void(Context&)> call;
};

struct TimingOptions {
  int warmup = 3;    // calls per candidate before sampling
  int samples = 7;   // interleaved samples per candidate (median reported)
  int reps = 3;      // calls per sample
  bool spin_shared = false;  // --spin-shared: the GPU spin also when ranks share a GPU (stress)
};

// Median ms per call of each candidate (slowest rank per sample). With one GPU per rank each
// sample's calls are enqueued behind a GPU spin, so host launch latency is not timed (as in the
// PyTorch baselines).
std::vector<double> time_interleaved(BenchWorld& world, const std::vector<Candidate>& cands,
                                     const TimingOptions& opt);

double tflops(int64_t m, int64_t n, int64_t k, double ms);

// Flags every op benchmark reads: --dtype bf16|fp16, --samples, --reps.
struct OpBenchOptions {
  DType dtype = DType::bf16;
  TimingOptions timing;
};
OpBenchOptions op_bench_options(const Args& args);

// The loop of every op benchmark: for each world size (world_sizes), a BenchWorld with a
// --heap-mb heap (default: default_heap_mb) and, once, the header line and the result table (printed by the
// root rank only); then body(world, table).
void for_each_world(const Args& args, const std::string& header, const std::vector<std::string>& columns,
                    const std::function<void(BenchWorld&, Table&)>& body, long default_heap_mb = 1024);

// World sizes to run from --ranks (default: 1 and 8 on one GPU); under --mpi, the job's size.
std::vector<int> world_sizes(const Args& args);

// --shapes random: the seed of the drawn shapes — --seed S, else a fresh one; under --mpi every
// process takes rank 0's, so that all draw the same shapes. Printed by the root with the count.
uint64_t random_shape_seed(const Args& args, BenchWorld& world, int count);

// The check of an op's automatic rule on random shapes: auto's speed against the fastest other
// way to the same result, and against the sequential baseline (ratios > 1: auto is faster).
// Prints their distribution (root only) and clears both.
void print_rule_check(BenchWorld& world, std::vector<double>& auto_vs_best, std::vector<double>& auto_vs_base);

// A fixed-width table printer that also appends rows to --csv.
class Table {
 public:
  // Prints (and writes --csv) only when `print`: under --mpi, rank 0 prints for the job.
  Table(const Args& args, std::vector<std::string> columns, bool print = true);
  ~Table();
  void row(const std::vector<std::string>& cells);

 private:
  std::vector<std::string> cols_;
  bool print_ = true;
  FILE* csv_ = nullptr;
};

std::string fmt(double v, int precision = 3);

}  // namespace tilelink::bench
