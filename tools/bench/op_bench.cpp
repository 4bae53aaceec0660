// tools/bench/op_bench.cpp — see op_bench.hpp.
#include "op_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <sstream>

#include "tilelink/runtime/error.hpp"

namespace tilelink::bench {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

std::vector<double> time_interleaved(InProcessWorld& world, const std::vector<Candidate>& cands,
                                     const TimingOptions& opt) {
  const int ranks = world.size();
  // ms[candidate][sample][rank]
  std::vector<std::vector<std::vector<double>>> ms(
      cands.size(), std::vector<std::vector<double>>(opt.samples, std::vector<double>(ranks, 0.0)));
  world.run([&](Context& ctx) {
    cudaStream_t st = ctx.stream();
    cudaEvent_t e0, e1;
    TL_CUDA_CHECK(cudaEventCreate(&e0));
    TL_CUDA_CHECK(cudaEventCreate(&e1));
    for (const auto& c : cands)
      for (int i = 0; i < opt.warmup; ++i) c.call(ctx);
    ctx.synchronize("benchmark warm-up");
    for (int s = 0; s < opt.samples; ++s) {
      for (size_t c = 0; c < cands.size(); ++c) {
        ctx.barrier();  // every rank starts the sample together
        TL_CUDA_CHECK(cudaEventRecord(e0, st));
        for (int i = 0; i < opt.reps; ++i) cands[c].call(ctx);
        TL_CUDA_CHECK(cudaEventRecord(e1, st));
        ctx.synchronize(cands[c].name.c_str());
        float t = 0;
        TL_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
        ms[c][s][ctx.rank()] = double(t) / opt.reps;
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  });
  std::vector<double> out;
  for (const auto& per_sample : ms) {
    std::vector<double> slowest;
    for (const auto& per_rank : per_sample) slowest.push_back(*std::max_element(per_rank.begin(), per_rank.end()));
    out.push_back(median(slowest));
  }
  return out;
}

double tflops(int64_t m, int64_t n, int64_t k, double ms) {
  return ms > 0 ? 2.0 * double(m) * double(n) * double(k) / (ms * 1e-3) / 1e12 : 0.0;
}

std::vector<int> world_sizes(const Args& args) {
  if (args.has("--ranks")) return {int(args.get_int("--ranks", 1))};
  int devices = 0;
  TL_CUDA_CHECK(cudaGetDeviceCount(&devices));
  return devices > 1 ? std::vector<int>{1, std::min(devices, 8)} : std::vector<int>{1, 8};
}

std::string fmt(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", precision, v);
  return buf;
}

Table::Table(const Args& args, std::vector<std::string> columns) : cols_(std::move(columns)) {
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
