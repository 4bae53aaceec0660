// tilelink-bench: `tilelink-bench` lists the commands, `tilelink-bench <command> [flags]` runs one,
// `tilelink-bench all [flags]` runs every command in name order. Exit codes: 0 ok, 1 a command
// failed (the error is printed), 2 no usable GPU.
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "bench/registry.hpp"
#include "tilelink/core/error.hpp"

namespace {

using tilelink::bench::registry;

void list_commands(std::FILE* out) {
  std::fprintf(out,
               "usage: tilelink-bench <command> [--ranks N] [--mpi] [--iters N] [--warmup N] "
               "[--csv FILE] [command flags]\n"
               "       tilelink-bench all [flags]   runs every command below, in name order\n\n"
               "commands:\n");
  if (registry().empty()) std::fprintf(out, "  (none built in)\n");
  for (const auto& [name, command] : registry())
    std::fprintf(out, "  %-16s %s\n", name.c_str(), command.help.c_str());
}

// The benchmarks need a Hopper GPU (the kernels are built for sm_90a only). Returns false, having
// said why, when there is none.
bool have_hopper_gpu() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::fprintf(stderr,
                 "tilelink-bench: no CUDA device is visible (%s); the benchmarks need a Hopper "
                 "(sm_90) GPU\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return false;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess || p.major != 9) {
      std::fprintf(stderr,
                   "tilelink-bench: GPU %d (%s) is sm_%d%d; tilelink is built for Hopper "
                   "(sm_90a) only\n",
                   d, p.name, p.major, p.minor);
      return false;
    }
  }
  return true;
}

int run_command(const tilelink::bench::Command& command, std::vector<char*> argv) {
  const tilelink::bench::Args args(int(argv.size()), argv.data());
  return command.run(args);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    list_commands(stdout);
    return 0;
  }
  const std::string name = argv[1];
  if (name != "all" && registry().count(name) == 0) {
    std::fprintf(stderr, "tilelink-bench: unknown command '%s'\n\n", name.c_str());
    list_commands(stderr);
    return 1;
  }
  // Benchmarks run several in-process ranks on one GPU, which needs this environment before the
  // first CUDA call (InProcessWorld explains why); values the caller set are kept.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  if (!have_hopper_gpu()) return 2;

  // Commands create their own worlds. Under --mpi, MPI is initialised here once for all of them,
  // so that `all` can run several MPI commands (MPI cannot be initialised twice).
  std::vector<char*> rest(argv + 1, argv + argc);  // rest[0]: the command name
  const bool mpi = tilelink::bench::Args(int(rest.size()), rest.data()).has("mpi");
  if (mpi) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      std::fprintf(stderr, "tilelink-bench: MPI_Init_thread failed\n");
      return 1;
    }
  }
  int rc = 0;
  try {
    if (name == "all") {
      for (const auto& [command_name, command] : registry()) {
        std::printf("== tilelink-bench %s ==\n", command_name.c_str());
        std::fflush(stdout);
        rest[0] = const_cast<char*>(command_name.c_str());
        const int status = run_command(command, rest);
        if (status != 0) {
          std::fprintf(stderr, "tilelink-bench: %s exited with %d\n", command_name.c_str(), status);
          rc = status;
        }
      }
      if (registry().empty()) std::printf("tilelink-bench: no commands are built in yet\n");
    } else {
      rc = run_command(registry().at(name), rest);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::fflush(stderr);
    // Other processes may sit in a collective this one will never join: end the whole job.
    if (mpi) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  if (mpi) MPI_Finalize();
  return rc;
}
