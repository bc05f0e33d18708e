// process_faults: the faults on one gapless process (faults.h). kill: SIGKILL, restarted when
// healed; stop: SIGSTOP, SIGCONT when healed; clock-skew: its wall clock moved by libfaketime
// (the monotonic clock left alone, as NTP leaves it), back when healed.
#include <signal.h>

#include "chaos/faults/faults.h"

namespace gapless::chaos {
namespace {

class KillFault : public FaultType {
 public:
  explicit KillFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override { d_->procs_[f.target].Kill(); }
  bool Heal(const Fault& f) override {
    Proc& p = d_->procs_[f.target];
    if (p.pid <= 0) p.Start();
    return true;
  }

 private:
  Deployment* d_;
};

class StopFault : public FaultType {
 public:
  explicit StopFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    Proc& p = d_->procs_[f.target];
    if (p.pid > 0 && kill(p.pid, SIGSTOP) == 0) p.stopped = true;
  }
  bool Heal(const Fault& f) override {
    Proc& p = d_->procs_[f.target];
    if (p.pid > 0 && p.stopped) kill(p.pid, SIGCONT);
    p.stopped = false;
    return true;
  }

 private:
  Deployment* d_;
};

class ClockSkewFault : public FaultType {
 public:
  explicit ClockSkewFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override { SetClock(d_->ClockFile(f.target), f.skew_ms); }
  bool Heal(const Fault& f) override {
    SetClock(d_->ClockFile(f.target), 0);
    return true;
  }

 private:
  Deployment* d_;
};

}  // namespace

std::unique_ptr<FaultType> MakeKillFault(Deployment* d) { return std::make_unique<KillFault>(d); }
std::unique_ptr<FaultType> MakeStopFault(Deployment* d) { return std::make_unique<StopFault>(d); }
std::unique_ptr<FaultType> MakeClockSkewFault(Deployment* d) {
  return std::make_unique<ClockSkewFault>(d);
}

}  // namespace gapless::chaos
