#include "core/env.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace gapless {
namespace {

class RealEnv : public Env {
 public:
  int64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t WallMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  void SleepMicros(int64_t micros) override {
    if (micros > 0) std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
  uint64_t Uniform(uint64_t bound) override {
    std::lock_guard<std::mutex> lock(mu_);
    return std::uniform_int_distribution<uint64_t>(0, bound - 1)(rng_);
  }

 private:
  std::mutex mu_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace

Env* Env::Default() {
  static RealEnv* env = new RealEnv();
  return env;
}

int64_t SimEnv::NowMicros() {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}
int64_t SimEnv::WallMicros() { return NowMicros(); }
void SimEnv::SleepMicros(int64_t micros) {
  std::lock_guard<std::mutex> lock(mu_);
  if (micros > 0) {
    now_ += micros;
    slept_ += micros;
  }
}
uint64_t SimEnv::Uniform(uint64_t bound) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::uniform_int_distribution<uint64_t>(0, bound - 1)(rng_);
}
void SimEnv::Advance(int64_t micros) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ += micros;
}
int64_t SimEnv::slept_micros() {
  std::lock_guard<std::mutex> lock(mu_);
  return slept_;
}

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

int64_t BackoffMicros(Env* env, int attempt, int64_t base_micros, int64_t cap_micros) {
  int shift = std::min(attempt, 30);
  int64_t ceiling = std::min(cap_micros, base_micros << shift);
  int64_t half = ceiling / 2;
  return half + static_cast<int64_t>(env->Uniform(static_cast<uint64_t>(ceiling - half) + 1));
}

}  // namespace gapless
