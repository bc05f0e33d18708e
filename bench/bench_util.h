// bench_util.h: what every benchmark executable needs and nothing more: dying with a message that
// names the benchmark, a small --flag value parser, a percentile, the dev PostgreSQL server's URL.
// Header-only; benchmarks are single-file programs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace gapless::bench {

// The program name Die() prefixes to its message; set it first thing in main().
inline std::string& ProgramName() {
  static std::string name = "bench";
  return name;
}

[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", ProgramName().c_str(), what.c_str());
  std::exit(1);
}

inline void Check(const Status& st, const char* what) {
  if (!st.ok()) Die(std::string(what) + ": " + st.ToString());
}

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The p-th percentile (0..100) of `v`, nearest rank (rounded); 0 for an empty `v`.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Flags: "--name value" options and "--name" switches, each bound to a setter. Parse() dies
// naming an unknown flag, a missing value or a value its setter rejects (std::stoll and friends
// throw std::exception on bad numbers).
class Flags {
 public:
  Flags& Value(std::string name, std::function<void(const std::string&)> set) {
    values_[std::move(name)] = std::move(set);
    return *this;
  }
  Flags& Switch(std::string name, std::function<void()> set) {
    switches_[std::move(name)] = std::move(set);
    return *this;
  }
  void Parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      std::string flag = argv[i];
      if (auto s = switches_.find(flag); s != switches_.end()) {
        s->second();
        continue;
      }
      auto v = values_.find(flag);
      if (v == values_.end()) Die("unknown flag " + flag);
      if (i + 1 >= argc) Die("missing value for " + flag);
      std::string value = argv[++i];
      try {
        v->second(value);
      } catch (const std::exception&) {
        Die("bad value for " + flag + ": " + value);
      }
    }
  }

 private:
  std::map<std::string, std::function<void(const std::string&)>> values_;
  std::map<std::string, std::function<void()>> switches_;
};

// The URL of the dev server of scripts/pg.sh (started, or reused, on its default port), for a
// benchmark run without --url. `source_dir` is the checkout (GAPLESS_SOURCE_DIR).
inline std::string DevServerUrl(const std::string& source_dir) {
  std::string script = source_dir + "/scripts/pg.sh";
  if (std::system((script + " start").c_str()) != 0) Die(script + " start failed");
  FILE* p = popen((script + " url").c_str(), "r");
  if (p == nullptr) Die(script + " url failed");
  char buf[512] = {0};
  if (std::fgets(buf, sizeof buf, p) == nullptr) Die(script + " url printed nothing");
  pclose(p);
  std::string url = buf;
  while (!url.empty() && (url.back() == '\n' || url.back() == '\r')) url.pop_back();
  return url;
}

}  // namespace gapless::bench
