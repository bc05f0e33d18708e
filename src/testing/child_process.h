// child_process: starting and reaping child processes for tests and the chaos harness (header
// only). SpawnChild forks and execs a program with its stdout and stderr appended to a log file;
// WaitForExit reaps it with a bound. Both act on the pids they are given, never on anything else.
//
// Thread-safety: functions only; Spawn is async-signal-safe after the fork except for the
// environment entries (putenv on the child's own copy).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace gapless {

// Runs args[0] with args; returns its pid (-1 when fork fails). With `log`, its stderr and
// stdout are appended to that file (restarted processes add to one log); `env` entries
// ("NAME=value") are added to its environment.
inline pid_t SpawnChild(const std::vector<std::string>& args, const std::string& log = "",
                        const std::vector<std::string>& env = {}) {
  pid_t pid = fork();
  if (pid == 0) {
    if (!log.empty() && freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
    if (!log.empty()) dup2(STDERR_FILENO, STDOUT_FILENO);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits up to `seconds` for pid to exit and returns its exit code; -1 if it was killed by a
// signal, or if it had to be SIGKILLed (after a SIGCONT) because it did not exit in time.
inline int WaitForExit(pid_t pid, int seconds) {
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace gapless
