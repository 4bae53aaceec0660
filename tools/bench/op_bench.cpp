// tools/bench/op_bench.cpp — see op_bench.hpp.
#include "op_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>

#include "bench/interleaved_timer.hpp"
#include "bench/shape_sample.hpp"
#include "tilelink/core/error.hpp"

namespace tilelink::bench {

BenchWorld::BenchWorld(const Args& args, int ranks, const WorldOptions& options) {
  if (args.has("mpi")) {
    int argc = args.argc();
    char** argv = args.argv();
    mpi_ = std::make_unique<MpiWorld>(&argc, &argv, options);
    if (mpi_->context().rank() == 0)
      std::printf("tilelink-bench: %d processes under MPI, transport %s\n", mpi_->size(),
                  mpi_->context().transport_name());
  } else {
    in_process_ = std::make_unique<InProcessWorld>(ranks, options);
  }
}

BenchWorld::~BenchWorld() = default;

int BenchWorld::size() const { return mpi_ ? mpi_->size() : in_process_->size(); }

bool BenchWorld::is_root() const { return !mpi_ || mpi_->context().rank() == 0; }

void BenchWorld::run(const std::function<void(Context&)>& fn) {
  if (mpi_) fn(mpi_->context());
  else in_process_->run(fn);
}

std::vector<double> time_interleaved(BenchWorld& world, const std::vector<Candidate>& cands,
                                     const TimingOptions& opt) {
  std::vector<double> out(cands.size(), 0.0);
  world.run([&](Context& ctx) {
    cudaStream_t st = ctx.stream();
    cudaEvent_t e0, e1;
    TL_CUDA_CHECK(cudaEventCreate(&e0));
    TL_CUDA_CHECK(cudaEventCreate(&e1));
    for (const auto& c : cands)
      for (int i = 0; i < opt.warmup; ++i) c.call(ctx);
    ctx.synchronize("benchmark warm-up");
    std::vector<double> mine(cands.size() * opt.samples);  // [candidate][sample], ms per call
    for (int s = 0; s < opt.samples; ++s) {
      for (size_t c = 0; c < cands.size(); ++c) {
        ctx.barrier();  // every rank starts the sample together
        // One GPU per rank: time GPU work only, as the PyTorch baselines do. Not with ranks
        // sharing a GPU: queueing every rank's whole call at once there can starve the side
        // stream's copy of this rank's rows of SMs (pull/sm, 8 ranks: a bounded-wait error in 1
        // of 2 runs, docs/PERF.md "Known issues"), and no baseline there needs the correction.
        if (ctx.max_ranks_per_gpu() == 1 || opt.spin_shared) gpu_spin(st, 300);
        TL_CUDA_CHECK(cudaEventRecord(e0, st));
        for (int i = 0; i < opt.reps; ++i) cands[c].call(ctx);
        TL_CUDA_CHECK(cudaEventRecord(e1, st));
        ctx.synchronize(cands[c].name.c_str());
        float t = 0;
        TL_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
        mine[c * opt.samples + s] = double(t) / opt.reps;
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    // Each sample counts as its slowest rank; every rank computes the same medians.
    std::vector<double> all(mine.size() * ctx.num_ranks());
    ctx.allgather(mine.data(), all.data(), mine.size() * sizeof(double));
    if (ctx.rank() != 0) return;
    for (size_t c = 0; c < cands.size(); ++c) {
      std::vector<double> slowest;
      for (int s = 0; s < opt.samples; ++s) {
        double worst = 0;
        for (int r = 0; r < ctx.num_ranks(); ++r) worst = std::max(worst, all[r * mine.size() + c * opt.samples + s]);
        slowest.push_back(worst);
      }
      out[c] = median(slowest);
    }
  });
  return out;
}

OpBenchOptions op_bench_options(const Args& args) {
  OpBenchOptions o;
  o.dtype = args.get("dtype", "bf16") == "fp16" ? DType::fp16 : DType::bf16;
  o.timing.samples = int(args.get_int("samples", 7));
  o.timing.reps = int(args.get_int("reps", 3));
  o.timing.spin_shared = args.has("spin-shared");
  return o;
}

uint64_t random_shape_seed(const Args& args, BenchWorld& world, int count) {
  const std::string fixed = args.get("seed", "");
  uint64_t seed = fixed.empty() ? (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()
                                : std::stoull(fixed, nullptr, 0);
  if (args.has("mpi"))
    world.run([&](Context& ctx) {
      std::vector<uint64_t> all(ctx.num_ranks());
      ctx.allgather(&seed, all.data(), sizeof(seed));
      seed = all[0];
    });
  if (world.is_root())
    std::printf("# %d random shapes, seed 0x%llx (--seed 0x%llx repeats them)\n", count, (unsigned long long)seed,
                (unsigned long long)seed);
  return seed;
}

void print_rule_check(BenchWorld& world, std::vector<double>& auto_vs_best, std::vector<double>& auto_vs_base) {
  if (world.is_root() && !auto_vs_best.empty()) {
    const RatioSummary b = summarize_ratios(auto_vs_best), c = summarize_ratios(auto_vs_base);
    std::printf("# auto vs the best candidate: geomean %.3f, min %.3f, p10 %.3f, %d of %d below 0.90\n", b.geomean,
                b.min, b.p10, b.below_090, b.count);
    std::printf("# auto vs the sequential baseline: geomean %.3f, min %.3f, p10 %.3f, %d of %d below 0.90\n",
                c.geomean, c.min, c.p10, c.below_090, c.count);
  }
  auto_vs_best.clear();
  auto_vs_base.clear();
}

void for_each_world(const Args& args, const std::string& header, const std::vector<std::string>& columns,
                    const std::function<void(BenchWorld&, Table&)>& body, long default_heap_mb) {
  std::unique_ptr<Table> table;
  for (int w : world_sizes(args)) {
    WorldOptions wo;
    wo.heap_bytes = size_t(args.get_int("heap-mb", default_heap_mb)) << 20;
    BenchWorld world(args, w, wo);
    if (!table) {
      if (world.is_root()) std::printf("%s\n", header.c_str());
      table = std::make_unique<Table>(args, columns, world.is_root());
    }
    body(world, *table);
  }
}

double tflops(int64_t m, int64_t n, int64_t k, double ms) {
  return ms > 0 ? 2.0 * double(m) * double(n) * double(k) / (ms * 1e-3) / 1e12 : 0.0;
}

std::vector<int> world_sizes(const Args& args) {
  if (args.has("mpi")) return {0};  // the job's size; BenchWorld ignores the count
  if (args.has("ranks")) return {int(args.get_int("ranks", 1))};
  int devices = 0;
  TL_CUDA_CHECK(cudaGetDeviceCount(&devices));
  return devices > 1 ? std::vector<int>{1, std::min(devices, 8)} : std::vector<int>{1, 8};
}

std::string fmt(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", precision, v);
  return buf;
}

Table::Table(const Args& args, std::vector<std::string> columns, bool print)
    : cols_(std::move(columns)), print_(print) {
  if (!print_) return;
  const std::string path = args.get("--csv", "");
  if (!path.empty()) {
    csv_ = std::fopen(path.c_str(), "a");
    TL_REQUIRE(csv_ != nullptr, "cannot open --csv ", path);
  }
  std::string line;
  for (const auto& c : cols_) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%-14s", c.c_str());
    line += buf;
  }
  std::printf("%s\n", line.c_str());
  if (csv_) {
    for (size_t i = 0; i < cols_.size(); ++i) std::fprintf(csv_, "%s%s", i ? "," : "", cols_[i].c_str());
    std::fprintf(csv_, "\n");
  }
}

Table::~Table() {
  if (csv_) std::fclose(csv_);
}

void Table::row(const std::vector<std::string>& cells) {
  if (!print_) return;
  std::string line;
  for (const auto& c : cells) {
    char buf[128];
    std::snprintf(buf, sizeof(buf), "%-14s", c.c_str());
    line += buf;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (csv_) {
    for (size_t i = 0; i < cells.size(); ++i) std::fprintf(csv_, "%s%s", i ? "," : "", cells[i].c_str());
    std::fprintf(csv_, "\n");
    std::fflush(csv_);
  }
}

}  // namespace tilelink::bench
