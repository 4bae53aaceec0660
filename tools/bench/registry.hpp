// tools/bench/registry.hpp — subcommands of tilelink-bench register themselves here.
//
//   static int run_primitives(const tilelink::bench::Args& args);
//   TILELINK_BENCH_COMMAND(primitives, "signal latency and put/get bandwidth", run_primitives);
//
// Common flags every command understands: --ranks N (in-process ranks; default: one per GPU, or
// 8 when there is one GPU), --mpi (one rank per process under mpirun), --iters, --warmup,
// --csv FILE. Commands read their own flags from Args too.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tilelink::bench {

class Args {
 public:
  Args(int argc, char** argv);
  bool has(const std::string& flag) const;
  std::string get(const std::string& flag, const std::string& fallback) const;
  long get_int(const std::string& flag, long fallback) const;
  double get_double(const std::string& flag, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }
  int argc() const { return argc_; }
  char** argv() const { return argv_; }

 private:
  std::map<std::string, std::string> flags_;
  std::vector<std::string> positional_;
  int argc_;
  char** argv_;
};

struct Command {
  std::string name, help;
  std::function<int(const Args&)> run;
};

std::map<std::string, Command>& registry();

struct Registrar {
  Registrar(const char* name, const char* help, std::function<int(const Args&)> fn) {
    registry()[name] = Command{name, help, std::move(fn)};
  }
};

}  // namespace tilelink::bench

#define TILELINK_BENCH_COMMAND(name, help, fn) \
  static ::tilelink::bench::Registrar tilelink_bench_registrar_##name(#name, help, fn)
