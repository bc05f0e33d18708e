// faults: the dispatcher over the kinds' types (faults.h), and the timeline's fault lines.
#include "chaos/faults/faults.h"

namespace gapless::chaos {

Faults::Faults(Deployment* d) : d_(d) {
  types_[FaultKind::kKill] = MakeKillFault(d);
  types_[FaultKind::kStop] = MakeStopFault(d);
  types_[FaultKind::kClockSkew] = MakeClockSkewFault(d);
  types_[FaultKind::kPartition] = MakePartitionFault(d);
  types_[FaultKind::kCut] = MakeCutFault(d);
  types_[FaultKind::kLatency] = MakeLatencyFault(d);
  types_[FaultKind::kLockNode] = MakeLockNodeFault(d);
  types_[FaultKind::kCoordRedis] = MakeCoordRedisFault(d);
  types_[FaultKind::kCoordFailover] = MakeCoordFailoverFault(d);
  types_[FaultKind::kBusDown] = MakeBusDownFault(d);
  types_[FaultKind::kPgRestart] = MakePgRestartFault(d);
  types_[FaultKind::kRpc] = MakeRpcFault(d);
  types_[FaultKind::kRpcOtherChain] = MakeRpcOtherChainFault(d);
  types_[FaultKind::kReorg] = MakeReorgFault(d);
  types_[FaultKind::kFlipFlop] = MakeFlipFlopFault(d);
}

void Faults::Inject(const Fault& f) {
  d_->Note("fault: " + f.Describe());
  types_.at(f.kind)->Inject(f);
}

void Faults::Heal(const Fault& f) {
  if (types_.at(f.kind)->Heal(f)) d_->Note("healed: " + f.Describe());
}

}  // namespace gapless::chaos
