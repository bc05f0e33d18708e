// faults: the faults the schedule draws (chaos/schedule.h), applied to a deployment. Each kind is
// a small type with Inject (at its time) and Heal (after its duration); a file per family:
//   process_faults.cc  kill, stop, clock-skew (a gapless process)
//   network_faults.cc  partition, cut, latency (a link's TCP proxy)
//   server_faults.cc   lock-node, coord-redis, coord-failover, bus-down, pg-restart
//   rpc_faults.cc      rpc (a process's RPC front answers badly), rpc-other-chain (as another
//                      chain)
//   chain_faults.cc    reorg (every second one moving the head on a minority first), flip-flop
// Faults writes "fault: ..." to the timeline before each Inject and "healed: ..." after each Heal
// that healed something.
//
// Thread-safety: Inject and Heal run on the scenario's thread; the faults that take long (a
// flip-flop, a head moved on a minority, RabbitMQ's stop and start) run on threads the deployment
// holds (chain_ops_, bus_ops_) and joins at its teardown.
#pragma once

#include <map>
#include <memory>

#include "chaos/deployment/deployment.h"
#include "chaos/schedule.h"

namespace gapless::chaos {

class FaultType {
 public:
  virtual ~FaultType() = default;
  virtual void Inject(const Fault& f) = 0;
  // Undoes what Inject did; false when there was nothing to heal (no "healed:" line): a kill is
  // healed by a restart, a re-org is not healed at all.
  virtual bool Heal(const Fault& f) { return (void)f, false; }
};

// One type per kind, over one deployment (borrowed; it outlives them).
class Faults {
 public:
  explicit Faults(Deployment* d);
  void Inject(const Fault& f);
  void Heal(const Fault& f);

 private:
  Deployment* d_;
  std::map<FaultKind, std::unique_ptr<FaultType>> types_;
};

// The families (each file's kinds), for Faults.
std::unique_ptr<FaultType> MakeKillFault(Deployment* d);
std::unique_ptr<FaultType> MakeStopFault(Deployment* d);
std::unique_ptr<FaultType> MakeClockSkewFault(Deployment* d);
std::unique_ptr<FaultType> MakePartitionFault(Deployment* d);
std::unique_ptr<FaultType> MakeCutFault(Deployment* d);
std::unique_ptr<FaultType> MakeLatencyFault(Deployment* d);
std::unique_ptr<FaultType> MakeLockNodeFault(Deployment* d);
std::unique_ptr<FaultType> MakeCoordRedisFault(Deployment* d);
std::unique_ptr<FaultType> MakeCoordFailoverFault(Deployment* d);
std::unique_ptr<FaultType> MakeBusDownFault(Deployment* d);
std::unique_ptr<FaultType> MakePgRestartFault(Deployment* d);
std::unique_ptr<FaultType> MakeRpcFault(Deployment* d);
std::unique_ptr<FaultType> MakeRpcOtherChainFault(Deployment* d);
std::unique_ptr<FaultType> MakeReorgFault(Deployment* d);
std::unique_ptr<FaultType> MakeFlipFlopFault(Deployment* d);

}  // namespace gapless::chaos
