// processes: a gapless process of a chaos deployment (its command, log, environment and pid), and
// what the harness reads or sets about one from outside: the state letter in /proc, the last line
// of its log, and its clock under libfaketime (the clock-skew faults).
//
// Thread-safety: a Proc has one owner (the scenario's thread); the rest are free functions.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gapless::chaos {

// A gapless process of the deployment: its command, its log, and its pid while it runs.
struct Proc {
  std::string name;
  std::vector<std::string> args;
  std::string log;
  std::vector<std::string> env;
  pid_t pid = -1;
  int metrics_port = 0;          // --metrics-addr 127.0.0.1:<port> (fleet processes), 0: none
  bool stopped = false;          // SIGSTOPped by a fault
  int64_t self_stopped_ms = -1;  // when it stopped itself at the failpoint (-1: it did not)
  void Start();
  void Kill();  // SIGKILL (after SIGCONT) and reap
};

// The state letter of /proc/PID/stat ('T': stopped), 0 when unreadable.
char ProcessState(pid_t pid);

// The last non-empty line of a process's log (at most 400 characters): why it exited, usually.
std::string LastLogLine(const std::string& path);

// libfaketime's preload library (Debian's multiarch directory), empty when it is not installed;
// then no clock-skew fault is drawn.
const std::string& FaketimeLibrary();
bool HaveFaketime();

// A process's clock, for libfaketime: `file` holds its offset ("+1s", "-30s"), read again every
// second. AddClock puts the process under libfaketime reading `file` (offset 0 to begin with);
// nothing without libfaketime.
void SetClock(const std::string& file, int64_t offset_ms);
void AddClock(Proc* p, const std::string& file);

}  // namespace gapless::chaos
