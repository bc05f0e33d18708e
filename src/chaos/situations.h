// situations: the two fixed situations every scenario holds (docs/chaos.md), besides the drawn
// faults. A stale writer: worker-1 stops itself right before its fenced write (the failpoint
// worker-stop-before-write, once per process start); the chain is re-orged under its range and it
// is resumed as soon as PostgreSQL records the rollback, so only the writer's re-org fence can
// refuse its write (or, when no re-org can be made, it is resumed after twice the lease TTL, when
// its range has been leased again: only the fence can refuse it). A stale completer: worker-2
// stops itself between its write and its completion; the same re-org revokes its lease, another
// worker claims the task and is stopped, the first is resumed: only the queue's lease-owner check
// can refuse its completion (the lease-held invariant).
//
// Thread-safety: the scenario's thread only.
#pragma once

#include <string>

#include "chaos/deployment/deployment.h"

namespace gapless::chaos {

// The failpoint watch, called often (every 100 ms: the lease of a worker that stopped itself
// lives 3 s at most, so it must be found within that time): a worker that stopped itself is
// re-orged under, or resumed after twice the lease TTL, when its range has been re-leased (and
// most likely committed) by another. A lease-held violation goes to *lease_violation (the first).
void WatchFailpoints(Deployment& d, std::string* lease_violation);

// With re-orgs on: the chain re-orged at the first block of the range the stopped worker holds
// (the old fork in its hands), and the worker resumed as soon as PostgreSQL recorded the
// rollback, before the range is written again: only the writer's re-org fence can refuse its
// write then (the range's row, and its token, went with the rollback). True when done.
bool ReorgUnder(Deployment& d, Proc& p);
// With re-orgs on: the same re-org under the range of a worker stopped after its write and
// before its completion; once the rollback revoked its lease and another worker claimed the
// task, that holder is stopped and the first one resumed: only the queue's lease-owner check
// can refuse its completion then (accepted, it would record the rolled-back range as completed
// and take the new holder's lease). The holder is resumed a second later. True when done.
bool StaleCompleteUnder(Deployment& d, Proc& p, std::string* lease_violation);
// The task `pid` holds a lease on ("" when none).
std::string LeasedTask(Deployment& d, pid_t pid);
// Re-orgs the chain at the first block of `task` and waits until PostgreSQL records the
// rollback. False when it could not (re-orgs off, a flip-flop holds the chain, too deep).
bool RollBackUnder(Deployment& d, Proc& p, const std::string& task);

}  // namespace gapless::chaos
