// processes: see processes.h.
#include "chaos/deployment/processes.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "testing/child_process.h"

namespace gapless::chaos {

void Proc::Start() {
  pid = SpawnChild(args, log, env);
  self_stopped_ms = -1;
}

void Proc::Kill() {
  if (pid <= 0) return;
  kill(pid, SIGCONT);
  kill(pid, SIGKILL);
  WaitForExit(pid, 10);
  pid = -1;
  stopped = false;
}

char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
}

std::string LastLogLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last.size() > 400 ? last.substr(last.size() - 400) : last;
}

// Every gapless process runs under libfaketime, with an offset of 0 until a clock-skew fault
// writes another into its file (read again every second). The monotonic clock is left alone.
// Debian installs it under the multiarch directory; empty when it is not installed.
const std::string& FaketimeLibrary() {
  static const std::string path = [] {
    for (const char* dir :
         {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/i386-linux-gnu",
          "/usr/lib/arm-linux-gnueabihf", "/usr/lib"}) {
      const std::string candidate = std::string(dir) + "/faketime/libfaketimeMT.so.1";
      if (access(candidate.c_str(), R_OK) == 0) return candidate;
    }
    return std::string();
  }();
  return path;
}

bool HaveFaketime() { return !FaketimeLibrary().empty(); }

void SetClock(const std::string& file, int64_t offset_ms) {
  std::ofstream out(file, std::ios::trunc);
  // libfaketime's relative form: "+1.5s", "-30s".
  out << fmt::format("{}{}s\n", offset_ms < 0 ? "-" : "+", std::abs(offset_ms) / 1000);
}

void AddClock(Proc* p, const std::string& file) {
  if (!HaveFaketime()) return;
  SetClock(file, 0);
  std::string asan = "verify_asan_link_order=0";  // libfaketime is preloaded before ASan's runtime
  if (const char* given = std::getenv("ASAN_OPTIONS")) asan = std::string(given) + ":" + asan;
  p->env.insert(p->env.end(), {"LD_PRELOAD=" + FaketimeLibrary(), "FAKETIME_TIMESTAMP_FILE=" + file,
                               "FAKETIME_CACHE_DURATION=1", "FAKETIME_DONT_FAKE_MONOTONIC=1",
                               "ASAN_OPTIONS=" + asan});
}

}  // namespace gapless::chaos
