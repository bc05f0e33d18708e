// network_faults: the faults on one link, "<process>><server>", through its TCP proxy (or its
// proxies: one per broker for a Kafka link) (faults.h). partition: a black hole, both ways or one
// (to-server, to-client), lifted when healed; cut: every connection reset now (healed at once),
// or after a number of bytes (a connection cut mid-message, until healed); latency: a delay with
// jitter, or a bandwidth limit, until healed.
#include "chaos/faults/faults.h"

namespace gapless::chaos {
namespace {

class PartitionFault : public FaultType {
 public:
  explicit PartitionFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    for (TcpProxy* l : d_->Links(f.target)) {
      if (f.mode == "to-server") {
        l->Pause(TcpProxy::Direction::kToServer);
      } else if (f.mode == "to-client") {
        l->Pause(TcpProxy::Direction::kToClient);
      } else {
        l->Pause();
      }
    }
  }
  bool Heal(const Fault& f) override {
    for (TcpProxy* l : d_->Links(f.target)) l->Resume();
    return true;
  }

 private:
  Deployment* d_;
};

class CutFault : public FaultType {
 public:
  explicit CutFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    for (TcpProxy* l : d_->Links(f.target)) {
      if (f.mode == "after-bytes") {
        l->CloseAfterBytes(f.bytes);
      } else {
        l->CloseAll();
      }
    }
  }
  bool Heal(const Fault& f) override {
    if (f.mode != "after-bytes") return false;  // a reset is over when it is done
    for (TcpProxy* l : d_->Links(f.target)) l->CloseAfterBytes(0);
    return true;
  }

 private:
  Deployment* d_;
};

class LatencyFault : public FaultType {
 public:
  explicit LatencyFault(Deployment* d) : d_(d) {}
  void Inject(const Fault& f) override {
    for (TcpProxy* l : d_->Links(f.target)) {
      if (f.mode == "bandwidth") {
        l->SetBandwidth(f.bytes);
      } else {
        l->SetLatency(f.latency_ms, f.latency_ms / 4);
      }
    }
  }
  bool Heal(const Fault& f) override {
    for (TcpProxy* l : d_->Links(f.target)) {
      if (f.mode == "bandwidth") {
        l->SetBandwidth(0);
      } else {
        l->SetLatency(0, 0);
      }
    }
    return true;
  }

 private:
  Deployment* d_;
};

}  // namespace

std::unique_ptr<FaultType> MakePartitionFault(Deployment* d) {
  return std::make_unique<PartitionFault>(d);
}
std::unique_ptr<FaultType> MakeCutFault(Deployment* d) { return std::make_unique<CutFault>(d); }
std::unique_ptr<FaultType> MakeLatencyFault(Deployment* d) {
  return std::make_unique<LatencyFault>(d);
}

}  // namespace gapless::chaos
