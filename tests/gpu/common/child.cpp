// Re-executing the test binary as a bounded child process (see gpu_test.hpp).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>

#include "gpu/common/gpu_test.hpp"

extern char** environ;

namespace tilelink::test {

ChildResult run_self_as_child(const std::string& gtest_filter,
                              const std::vector<std::pair<std::string, std::string>>& env,
                              double timeout_s) {
  ChildResult r;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    r.output = std::string("readlink(/proc/self/exe) failed: ") + std::strerror(errno);
    return r;
  }
  exe[n] = '\0';

  // Environment: ours, with `env` overriding or adding.
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) vars[std::string(*e, size_t(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : env) vars[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::string filter_arg = "--gtest_filter=" + gtest_filter;
  std::string color_arg = "--gtest_color=no";
  std::vector<char*> argv = {exe, filter_arg.data(), color_arg.data(), nullptr};

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.output = std::string("pipe2 failed: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    r.output = std::string("posix_spawn(") + exe + ") failed: " + std::strerror(rc);
    return r;
  }
  r.started = true;

  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  bool open = true;
  char buf[4096];
  while (open) {
    const double left = timeout_s - elapsed();
    if (left <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, int(left * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // timeout: the loop head kills it
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got > 0) r.output.append(buf, size_t(got));
    else if (got == 0 || errno != EINTR) open = false;  // EOF: every writer closed the pipe
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.seconds = elapsed();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
  return r;
}

}  // namespace tilelink::test
