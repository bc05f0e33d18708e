// situations: see situations.h.
#include "chaos/situations.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "coord/keys.h"
#include "store/state.h"

namespace gapless::chaos {

void WatchFailpoints(Deployment& d, std::string* lease_violation) {
  for (auto& [name, p] : d.procs_) {
    if (p.pid <= 0 || p.stopped) continue;
    const int64_t now = MillisSince(d.start_);
    if (p.self_stopped_ms < 0 && ProcessState(p.pid) == 'T') {
      p.self_stopped_ms = now;
      if (name == Deployment::kStaleCompleter) {
        d.Note(name + " stopped itself before its completion (failpoint)");
        if (StaleCompleteUnder(d, p, lease_violation)) continue;
      } else {
        d.Note(name + " stopped itself before its write (failpoint)");
        if (ReorgUnder(d, p)) continue;
      }
    } else if (p.self_stopped_ms >= 0 && now - p.self_stopped_ms > 2 * d.options_.lease_ttl_ms &&
               ProcessState(p.pid) == 'T') {
      kill(p.pid, SIGCONT);
      d.Note(name + (name == Deployment::kStaleCompleter
                         ? " resumed: its completion must be refused (not the lease holder)"
                         : " resumed: its write must be refused by the fence"));
    }
  }
}

std::string LeasedTask(Deployment& d, pid_t pid) {
  auto redis = RedisConn::Connect(d.coord_->url());
  if (!redis.ok()) return "";
  // The worker's lease: {"worker":"host:<pid>:0","token":...}.
  const std::string who = fmt::format(":{}:", pid);
  std::string cursor = "0";
  do {
    auto page = (*redis)->Command({"SCAN", cursor, "MATCH", "*queue:leases", "COUNT", "1000"});
    if (!page.ok()) return "";
    cursor = page->elements[0].str;
    for (const auto& key : page->elements[1].elements) {
      auto leases = (*redis)->Command({"HGETALL", key.str});
      if (!leases.ok()) continue;
      for (size_t i = 0; i + 1 < leases->elements.size(); i += 2) {
        if (leases->elements[i + 1].str.find(who) != std::string::npos) {
          return leases->elements[i].str;
        }
      }
    }
  } while (cursor != "0");
  return "";
}

bool RollBackUnder(Deployment& d, Proc& p, const std::string& task) {
  const auto& kinds = d.options_.kinds;
  if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), FaultKind::kReorg) == kinds.end()) {
    return false;
  }
  const uint64_t from = std::stoull(task.substr(0, task.find('-')));
  int64_t reorgs_before = 0;
  {
    auto conn = d.pool_->Acquire();
    auto r = conn->Query("SELECT count(*) FROM reorgs");
    if (!r.ok()) {
      d.Note("  no re-org under " + task + ": " + r.status().ToString());
      return false;
    }
    reorgs_before = r->GetInt64(0, 0).value();
  }
  {
    // The traffic holds the chain for a moment at a time; a flip-flop for seconds.
    std::unique_lock<std::mutex> lock(d.chain_mu_, std::defer_lock);
    for (int i = 0; i < 100 && !lock.try_lock(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!lock.owns_lock()) {
      d.Note("  no re-org under " + task + ": a flip-flop holds the chain");
      return false;
    }
    const uint64_t tip = d.Tip();
    if (from == 0 || from > tip || tip - from + 1 > 60) {
      d.Note(fmt::format("  no re-org under {}: the chain's tip is {}", task, tip));
      return false;
    }
    d.Note(fmt::format("targeted: the chain re-orgs under {}'s range {} (depth {})", p.name, task,
                       tip - from + 1));
    d.Note(fmt::format("fault: reorg depth {}", tip - from + 1));
    d.ReorgChain(*d.rpc_, tip - from + 1, static_cast<int64_t>(from));
  }
  for (int i = 0; i < 400; ++i) {
    auto conn = d.pool_->Acquire();
    auto r = conn->Query("SELECT count(*) FROM reorgs");
    if (r.ok() && r->GetInt64(0, 0).value() > reorgs_before) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  d.Note("the rollback was not recorded within 20 s; resuming later");
  return false;
}

bool ReorgUnder(Deployment& d, Proc& p) {
  const std::string task = LeasedTask(d, p.pid);
  if (task.empty()) d.Note("  no lease of " + p.name + " found");
  if (task.empty() || !RollBackUnder(d, p, task)) return false;
  kill(p.pid, SIGCONT);
  d.Note(p.name + " resumed right after the rollback: its old-fork write must be refused");
  p.self_stopped_ms = INT64_MAX / 2;  // resumed
  return true;
}

bool StaleCompleteUnder(Deployment& d, Proc& p, std::string* lease_violation) {
  const std::string task = LeasedTask(d, p.pid);
  if (task.empty()) d.Note("  no lease of " + p.name + " found");
  if (task.empty() || !RollBackUnder(d, p, task)) return false;
  // The leader's rollback revokes the lease and puts the task first in line; the next claim
  // takes it. The new holder is stopped as soon as its lease shows, so that it still holds it
  // when the revoked holder completes.
  auto conn = d.pool_->Acquire();
  auto id = EnsureDatabaseId(*conn);
  const Keys keys(static_cast<int64_t>(kChainId), id.ok() ? *id : "");
  auto redis = RedisConn::Connect(d.coord_->url());
  const std::string mine = fmt::format(":{}:", p.pid);
  Proc* holder = nullptr;
  for (int i = 0; i < 10'000 && redis.ok() && holder == nullptr; ++i) {
    auto lease = (*redis)->Command({"HGET", keys.leases(), task});
    if (lease.ok() && !lease->str.empty() && lease->str.find(mine) == std::string::npos) {
      for (auto& [name, other] : d.procs_) {
        if (other.pid > 0 && !other.stopped &&
            lease->str.find(fmt::format(":{}:", other.pid)) != std::string::npos) {
          holder = &other;
        }
      }
      if (holder == nullptr) break;  // a process of no name, or one a fault stopped
    }
    if (holder == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (holder != nullptr && kill(holder->pid, SIGSTOP) == 0) {
    d.Note(fmt::format("targeted: {} holds {} now; stopped while {} completes", holder->name, task,
                       p.name));
  } else {
    holder = nullptr;
    d.Note(fmt::format("no other holder of {} seen within 10 s", task));
  }
  kill(p.pid, SIGCONT);
  d.Note(p.name + " resumed after the rollback: its completion of " + task + " must be refused");
  p.self_stopped_ms = INT64_MAX / 2;  // resumed
  if (holder != nullptr) {
    // The holder was stopped well within its lease and nothing revoked it (no fault is applied
    // while this runs; a re-org of another thread is seen in PostgreSQL): it must still hold the
    // task once the revoked holder has tried to complete it.
    auto reorgs = [&]() -> int64_t {
      auto r = conn->Query("SELECT count(*) FROM reorgs");
      return r.ok() ? r->GetInt64(0, 0).value() : -1;
    };
    const int64_t before = reorgs();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto lease = (*redis)->Command({"HGET", keys.leases(), task});
    const bool held =
        lease.ok() && lease->str.find(fmt::format(":{}:", holder->pid)) != std::string::npos;
    // Taken by a completion (the task neither pending nor in processing any more: it ended),
    // not by another rollback's revocation (which puts it back in pending): only the revoked
    // holder can have completed it meanwhile.
    auto in_pending = (*redis)->Command({"LPOS", keys.pending(), task});
    auto in_processing = (*redis)->Command({"LPOS", keys.processing(), task});
    const bool completed_meanwhile =
        in_pending.ok() && in_pending->is_nil() && in_processing.ok() && in_processing->is_nil();
    if (lease.ok() && !held && completed_meanwhile && before >= 0 && reorgs() == before &&
        lease_violation->empty()) {
      *lease_violation = fmt::format(
          "{} lost its lease of {} while stopped for 0.5 s: the completion of {}, whose lease "
          "the rollback had revoked, was accepted",
          holder->name, task, p.name);
      d.Note("VIOLATION lease-held: " + *lease_violation);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(holder->pid, SIGCONT);
    d.Note(holder->name + (held ? " resumed, still holding " + task : " resumed"));
  }
  return true;
}

}  // namespace gapless::chaos
