// tilelink-gemm-probe: every compiled candidate tile (candidates_*.cu) against cuBLASLt as
// PyTorch's F.linear runs it, per shape. Each candidate's output is checked once against an fp32
// reference; then candidate and cuBLASLt alternate in CUDA-event-timed blocks of >= 0.5 ms (the
// bench's InterleavedTimer: host launch latency kept out by a spin kernel) over
// two input sets, and the median of --samples blocks is printed as CSV:
//   shape,candidate,us,cublaslt_us,ratio,check      (ratio = cuBLASLt time / candidate time)
//
//   tilelink-gemm-probe --shapes 1649x256x4672,1386x1592x8232 [--candidates a,b] [--samples 20] [--seed S]
//   tilelink-gemm-probe --shapes-file shapes.txt      (one "M N K" per line)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/interleaved_timer.hpp"
#include "bench/registry.hpp"
#include "candidate.cuh"
#include "tilelink/testing/check.hpp"

namespace tilelink::probe {
std::vector<Candidate>& candidates() {
  static std::vector<Candidate> all;
  return all;
}
}  // namespace tilelink::probe

namespace {

using tilelink::DType;
namespace test = tilelink::test;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "gemm-probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Shape {
  int M, N, K;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<Shape> read_shapes(const tilelink::bench::Args& args) {
  std::vector<Shape> shapes;
  for (const auto& s : split(args.get("shapes", ""), ',')) {
    Shape x{};
    if (std::sscanf(s.c_str(), "%dx%dx%d", &x.M, &x.N, &x.K) != 3) {
      std::fprintf(stderr, "gemm-probe: --shapes: '%s' is not MxNxK\n", s.c_str());
      std::exit(2);
    }
    shapes.push_back(x);
  }
  const std::string file = args.get("shapes-file", "");
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) {
      std::fprintf(stderr, "gemm-probe: cannot read %s\n", file.c_str());
      std::exit(2);
    }
    for (Shape x{}; in >> x.M >> x.N >> x.K;) shapes.push_back(x);
  }
  for (const Shape& s : shapes)
    if (s.M < 1 || s.N < 8 || s.K < 8 || s.N % 8 || s.K % 8) {
      std::fprintf(stderr, "gemm-probe: %dx%dx%d: M >= 1, N and K multiples of 8 (TMA alignment)\n", s.M, s.N, s.K);
      std::exit(2);
    }
  return shapes;
}


}  // namespace

static int probe(int argc, char** argv) {
  const tilelink::bench::Args args(argc, argv);
  const std::vector<Shape> shapes = read_shapes(args);
  if (shapes.empty()) {
    std::fprintf(stderr, "usage: tilelink-gemm-probe --shapes MxNxK[,...] | --shapes-file F [--candidates a,b] "
                         "[--samples N] [--seed S]\ncandidates compiled in:");
    for (const auto& c : tilelink::probe::candidates()) std::fprintf(stderr, " %s", c.name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  const auto wanted = split(args.get("candidates", ""), ',');
  for (const auto& name : wanted)
    if (std::none_of(tilelink::probe::candidates().begin(), tilelink::probe::candidates().end(),
                     [&](const tilelink::probe::Candidate& c) { return c.name == name; })) {
      std::fprintf(stderr, "gemm-probe: --candidates: no candidate '%s' compiled in\n", name.c_str());
      return 2;
    }
  const int samples = int(std::max(5L, args.get_int("samples", 20)));
  const uint64_t seed = uint64_t(args.get_int("seed", long(std::random_device{}())));
  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::fprintf(stderr, "gemm-probe: %s, %d SMs, seed 0x%llx, %d samples\n", prop.name, sms, (unsigned long long)seed,
               samples);

  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  tilelink::bench::InterleavedTimer timer(stream, 2);
  test::CublasGemm cublaslt(stream);

  void* workspace = nullptr;  // grown to the largest a candidate has asked for
  size_t workspace_size = 0;
  std::printf("shape,candidate,us,cublaslt_us,ratio,check\n");
  for (const Shape& s : shapes) {
    const size_t a_elems = size_t(s.M) * s.K, b_elems = size_t(s.N) * s.K, d_elems = size_t(s.M) * s.N;
    void *A[2], *B[2], *D = nullptr;
    float* ref = nullptr;
    for (int i = 0; i < 2; ++i) {
      check_cuda(cudaMalloc(&A[i], a_elems * 2), "cudaMalloc");
      check_cuda(cudaMalloc(&B[i], b_elems * 2), "cudaMalloc");
      test::fill_uniform(DType::bf16, A[i], int64_t(a_elems), seed + 4 * i, 1.0f, stream);
      test::fill_uniform(DType::bf16, B[i], int64_t(b_elems), seed + 4 * i + 1, 1.0f, stream);
    }
    check_cuda(cudaMalloc(&D, d_elems * 2), "cudaMalloc");
    check_cuda(cudaMalloc(&ref, d_elems * sizeof(float)), "cudaMalloc");
    test::reference_gemm(DType::bf16, A[0], B[0], ref, s.M, s.N, s.K, stream);
    const test::Tolerance tol = test::gemm_tolerance(DType::bf16, s.K);
    auto baseline = [&](int i) { cublaslt.run(DType::bf16, A[i], B[i], D, s.M, s.N, s.K); };
    for (const auto& c : tilelink::probe::candidates()) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), c.name) == wanted.end()) continue;
      const size_t need = c.workspace_bytes(s.M, s.N, s.K, sms);
      if (need > workspace_size) {
        if (workspace) check_cuda(cudaFree(workspace), "cudaFree");
        check_cuda(cudaMalloc(&workspace, need), "cudaMalloc");
        workspace_size = need;
      }
      test::poison_nan(DType::bf16, D, int64_t(d_elems), stream);
      if (!c.run(A[0], B[0], D, s.M, s.N, s.K, workspace, sms, stream)) {
        std::printf("%dx%dx%d,%s,,,,refused\n", s.M, s.N, s.K, c.name.c_str());
        continue;
      }
      check_cuda(cudaGetLastError(), c.name.c_str());
      const test::Comparison cmp =
          test::compare(DType::bf16, D, s.N, ref, s.M, s.N, tol.atol, tol.rtol, stream);
      const bool ok = cmp.bad == 0 && cmp.rel_fro <= tol.rel_fro;
      auto candidate = [&](int i) { c.run(A[i], B[i], D, s.M, s.N, s.K, workspace, sms, stream); };
      const std::vector<double> ms = timer.measure({candidate, baseline}, samples);
      check_cuda(cudaGetLastError(), c.name.c_str());
      const double us = 1000.0 * ms[0], base = 1000.0 * ms[1];
      std::printf("%dx%dx%d,%s,%.2f,%.2f,%.3f,%s\n", s.M, s.N, s.K, c.name.c_str(), us, base, base / us,
                  ok ? "ok" : test::describe(cmp).c_str());
      std::fflush(stdout);
    }
    for (void* p : {A[0], A[1], B[0], B[1], D, static_cast<void*>(ref)}) check_cuda(cudaFree(p), "cudaFree");
  }
  if (workspace) check_cuda(cudaFree(workspace), "cudaFree");
  return 0;
}

int main(int argc, char** argv) {
  try {
    return probe(argc, argv);
  } catch (const std::exception& e) {  // bad flags (tilelink::Error), cuBLASLt refusing a shape
    std::fprintf(stderr, "gemm-probe: %s\n", e.what());
    return 2;
  }
}
