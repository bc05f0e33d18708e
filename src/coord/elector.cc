#include "coord/elector.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "core/metrics.h"

namespace gapless {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kFollower:
      return "follower";
    case Role::kPromoting:
      return "promoting";
    case Role::kLeader:
      return "leader";
  }
  return "?";
}

Elector::Elector(const Election* election, HeadSource* source, ElectorOptions options)
    : election_(election),
      source_(source),
      options_(std::move(options)),
      env_(options_.env != nullptr ? options_.env : Env::Default()),
      reader_(election) {
  if (options_.heartbeat_ms <= 0)
    options_.heartbeat_ms = std::max<int64_t>(1, election_->options().ttl_ms / 3);
  if (options_.name.empty()) options_.name = election_->options().owner;
}

Elector::~Elector() { Stop(); }

void Elector::Start() {
  std::lock_guard lock(mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
  if (options_.subscribe) {
    for (size_t i = 0; i < election_->nodes().size(); ++i) {
      subscribers_.emplace_back([this, i] { Subscribe(i); });
    }
  }
}

void Elector::Stop(bool release) {
  {
    std::lock_guard lock(mu_);
    release_on_stop_ = release;
    if (!started_ || stop_.load()) {
      stop_.store(true);
      return;
    }
    stop_.store(true);
    woken_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& t : subscribers_) t.join();
  subscribers_.clear();
}

Role Elector::role() const {
  std::lock_guard lock(mu_);
  return role_;
}

std::optional<uint64_t> Elector::LeaderToken() const {
  std::lock_guard lock(mu_);
  if (role_ != Role::kLeader || stop_.load() || env_->NowMicros() >= valid_until_)
    return std::nullopt;
  return token_;
}

std::optional<HeadEntry> Elector::committed_tip() const {
  std::lock_guard lock(mu_);
  return tip_;
}

HeadFork Elector::fork() const {
  std::lock_guard lock(mu_);
  return fork_;
}

std::optional<HeadFork> Elector::ForksSince(uint64_t after) const {
  std::lock_guard lock(mu_);
  std::optional<HeadFork> out;
  for (const HeadFork& f : forks_applied_) {
    if (f.generation <= after) continue;
    if (!out.has_value()) out = f;
    out->generation = std::max(out->generation, f.generation);
    out->point = std::min(out->point, f.point);
  }
  return out;
}

Status Elector::source_error() const {
  std::lock_guard lock(mu_);
  return source_error_;
}

Elector::Stats Elector::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Elector::Wait(int64_t ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(0, ms)),
               [&] { return woken_ || stop_.load(); });
  woken_ = false;
}

void Elector::Wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

namespace {

struct ElectorMetrics {
  Gauge& leading;
  Gauge& epoch;
  Counter& terms;
  Counter& renewals;
  Counter& renewal_failures;
  Gauge& lock_nodes_answering;
};

ElectorMetrics& Metrics() {
  MetricsRegistry& m = MetricsRegistry::Default();
  static ElectorMetrics metrics{
      m.GaugeFamily("gapless_leader", "1 while this process is the HA leader, else 0").Get(),
      m.GaugeFamily("gapless_leader_epoch",
                    "The epoch (fencing token) of this process's leadership; 0 when not leading")
          .Get(),
      m.CounterFamily("gapless_leader_terms_total",
                      "Times this process became the leader (each a new epoch)")
          .Get(),
      m.CounterFamily("gapless_lease_renewals_total",
                      "Leader lease renewals (head-log writes) that reached a quorum")
          .Get(),
      m.CounterFamily("gapless_lease_renewal_failures_total",
                      "Leader lease renewals that fell short of a quorum or were refused")
          .Get(),
      m.GaugeFamily("gapless_lock_nodes_answering",
                    "Lock nodes that accepted the leader's last lease renewal")
          .Get()};
  return metrics;
}

}  // namespace

void Elector::SetRole(Role role, uint64_t token) {
  bool changed;
  {
    std::lock_guard lock(mu_);
    changed = role_ != role || token_ != token;
    role_ = role;
    token_ = token;
    if (role == Role::kLeader && changed) ++stats_.terms;
    if (role != Role::kLeader) valid_until_ = 0;
  }
  ElectorMetrics& metrics = Metrics();
  if (role == Role::kLeader && changed) metrics.terms.Inc();
  metrics.leading.Set(role == Role::kLeader ? 1 : 0);
  metrics.epoch.Set(role == Role::kLeader ? static_cast<double>(token) : 0);
}

void Elector::Loop() {
  while (!stop_.load()) {
    if (role() == Role::kLeader) {
      int64_t started = env_->NowMicros();
      Lead();
      int64_t spent_ms = (env_->NowMicros() - started) / 1000;
      if (role() == Role::kLeader) Wait(options_.heartbeat_ms - spent_ms);
    } else {
      Follow();
    }
  }
  // Graceful stepdown: stop producing (LeaderToken() is already nullopt), release everywhere.
  if (role() == Role::kLeader) {
    bool release;
    {
      std::lock_guard lock(mu_);
      release = release_on_stop_;
    }
    StepDown(release ? "stopping" : "stopping without release", release, /*asked=*/true);
  }
}

void Elector::Follow() {
  // Stay current with the log, so a promotion needs no catch-up.
  auto synced = reader_.Sync();
  if (!synced.ok())
    spdlog::debug("elector {}: head log sync: {}", options_.name, synced.status().message());
  {
    std::lock_guard lock(mu_);
    tip_ = reader_.CommittedTip();
  }
  // Is the lock free on a quorum? Also the shortest remaining TTL, to look again right then.
  const std::string lock_key = election_->keys().election_lock();
  auto replies = election_->nodes().All([&](RedisConn& c) -> Result<RedisReply> {
    GAPLESS_ASSIGN_OR_RETURN(RedisReply ttl, c.Command({"PTTL", lock_key}));
    return ttl;
  });
  size_t free = 0, answered = 0;
  std::vector<int64_t> ttls;
  for (const auto& r : replies) {
    if (!r.ok()) continue;
    ++answered;
    if (r->integer == -2) {
      ++free;  // no lock
    } else if (r->integer >= 0) {
      ttls.push_back(r->integer);
    }
  }
  NoteQuorum(answered);
  if (free >= election_->nodes().quorum()) {
    TryPromote();
    if (role() != Role::kLeader && !stop_.load()) {
      Wait(options_.retry_delay_ms + static_cast<int64_t>(env_->Uniform(static_cast<uint64_t>(
                                         std::max<int64_t>(1, options_.poll_jitter_ms / 2)))));
    }
    return;
  }
  int64_t wait = options_.poll_ms + static_cast<int64_t>(env_->Uniform(static_cast<uint64_t>(
                                        std::max<int64_t>(1, options_.poll_jitter_ms))));
  // The lock is free on a quorum when the (quorum - free)-th shortest of the held TTLs runs out.
  size_t missing = election_->nodes().quorum() - free;
  if (options_.wake_at_lock_expiry && missing >= 1 && ttls.size() >= missing) {
    std::nth_element(ttls.begin(), ttls.begin() + static_cast<ptrdiff_t>(missing - 1), ttls.end());
    wait = std::min(wait, ttls[missing - 1] + 1);
  }
  Wait(wait);
}

void Elector::NoteQuorum(size_t answered) {
  const size_t quorum = election_->nodes().quorum();
  const int64_t now = env_->NowMicros();
  if (answered >= quorum) {
    if (quorum_warned_at_ != 0) {
      spdlog::info("elector {}: the lock quorum answers again ({} of {} lock nodes)", options_.name,
                   answered, election_->nodes().size());
    }
    quorum_lost_since_ = 0;
    quorum_warned_at_ = 0;
    return;
  }
  if (quorum_lost_since_ == 0) quorum_lost_since_ = now;
  const int64_t lost_ms = (now - quorum_lost_since_) / 1000;
  if (lost_ms < options_.quorum_warning_after_ms) return;
  if (quorum_warned_at_ != 0 && now - quorum_warned_at_ < 30'000'000) return;
  quorum_warned_at_ = now;
  spdlog::warn(
      "elector {}: {} of {} lock nodes answer (quorum {}) for {:.1f} s: this process cannot "
      "become the leader, nor see one (gapless status and /readyz name the nodes)",
      options_.name, answered, election_->nodes().size(), quorum, lost_ms / 1000.0);
}

void Elector::TryPromote() {
  SetRole(Role::kPromoting, 0);
  int64_t started = env_->NowMicros();
  QuorumOutcome promoted = election_->Promote();
  if (!promoted.quorum) {
    spdlog::debug("elector {}: promotion failed: {}", options_.name, promoted.Summary());
    SetRole(Role::kFollower, 0);
    return;
  }
  uint64_t token = promoted.max_epoch;
  // Persist the token on a quorum before it is used anywhere else (election.h).
  QuorumOutcome persisted = election_->Renew(token);
  if (!persisted.quorum) {
    spdlog::warn("elector {}: promoted with epoch {} but could not persist it: {}", options_.name,
                 token, persisted.Summary());
    (void)election_->Release();
    SetRole(Role::kFollower, 0);
    return;
  }
  {
    std::lock_guard lock(mu_);
    valid_until_ = started + (election_->options().ttl_ms - election_->drift_ms()) * 1000;
  }
  // Repair: re-propose every sub-quorum entry (highest epoch first per height), then lead.
  Status repaired = Repair(token);
  if (!repaired.ok()) {
    StepDown(repaired.message(), true);
    return;
  }
  {
    std::lock_guard lock(mu_);
    tip_ = reader_.CommittedTip();
  }
  spdlog::info("elector {}: leader with epoch {} (promotion {}; head log tip {})", options_.name,
               token, promoted.Summary(),
               tip_.has_value() ? std::to_string(tip_->height) : std::string("empty"));
  SetRole(Role::kLeader, token);
}

Status Elector::Repair(uint64_t token) {
  auto synced = reader_.Sync();
  if (!synced.ok()) return synced.status().WithContext("cannot read the head log");
  HeadFork fork;
  bool adopted = false;
  {
    // The newest truncation a node shows (a leader died after truncating, maybe on one node
    // only): write with it, so the repair spreads it.
    std::lock_guard lock(mu_);
    if (reader_.fork().generation > fork_.generation) {
      AdoptFork(reader_.fork());
      adopted = true;
    }
    fork = fork_;
  }
  std::vector<HeadEntry> orphans = reader_.SubQuorum();
  for (size_t i = 0; i < orphans.size(); i += options_.max_entries_per_write) {
    size_t n = std::min(options_.max_entries_per_write, orphans.size() - i);
    int64_t write_started = env_->NowMicros();
    QuorumOutcome repaired =
        election_->WriteHead(token, std::span<const HeadEntry>(orphans.data() + i, n), fork);
    if (!repaired.quorum) {
      return Unavailable(fmt::format("repair of heights {}..{} short of a quorum: {}",
                                     orphans[i].height, orphans[i + n - 1].height,
                                     repaired.Summary()));
    }
    std::lock_guard lock(mu_);
    stats_.repaired += n;
    valid_until_ = write_started + (election_->options().ttl_ms - election_->drift_ms()) * 1000;
  }
  if (!orphans.empty()) {
    spdlog::info("elector {}: repaired {} head-log entries below a quorum (heights {}..{})",
                 options_.name, orphans.size(), orphans.front().height, orphans.back().height);
    (void)reader_.Sync();
  }
  if (adopted) {
    std::lock_guard lock(mu_);
    tip_ = reader_.CommittedTip();
  }
  return Status::Ok();
}

void Elector::AdoptFork(const HeadFork& fork) {
  fork_ = fork;
  forks_applied_.push_back(fork);
  if (forks_applied_.size() > 64) forks_applied_.erase(forks_applied_.begin());
  if (tip_.has_value() && static_cast<int64_t>(tip_->height) > fork.point) tip_.reset();
}

void Elector::Lead() {
  uint64_t token;
  std::optional<HeadEntry> tip;
  HeadFork fork;
  std::optional<PendingFork> pending;
  {
    std::lock_guard lock(mu_);
    token = token_;
    tip = tip_;
    fork = fork_;
    pending = pending_fork_;
  }
  int64_t started = env_->NowMicros();
  // A truncation written short of a quorum may still have landed on nodes whose answers were lost:
  // their log already holds the new fork above the point, so a fork point looked for again there
  // would be higher than the real one, and the leader's duties would keep the old fork's blocks
  // between the two (chaos seed 13). So the truncation is finished first, from its own point.
  auto next = source_->Next(pending.has_value() ? std::optional<HeadEntry>(pending->at) : tip,
                            options_.max_entries_per_write);
  {
    std::lock_guard lock(mu_);
    source_error_ = next.ok() ? Status::Ok() : next.status();
  }
  std::vector<HeadEntry> entries;
  if (!next.ok()) {
    spdlog::warn("elector {}: no head to write, the lease is not renewed: {}", options_.name,
                 next.status().message());
  } else {
    entries = std::move(next->entries);
    if (next->fork.has_value()) {
      // A re-org: the next generation, truncating every node's log above the fork point. The
      // fork point's own entry goes first (already there with the same hash), so the write is
      // never empty. Below a pending truncation: the generation after it (a node that took it is
      // one behind and cut at the new point, one that did not is two behind and emptied).
      const uint64_t base = pending.has_value() ? pending->fork.generation : fork.generation;
      fork = HeadFork{base + 1, static_cast<int64_t>(next->fork->height)};
      entries.insert(entries.begin(), *next->fork);
      spdlog::warn(
          "elector {}: re-org: the chain left the head log above block {} (tip was {}); "
          "truncating the log there (fork generation {})",
          options_.name, next->fork->height, tip.has_value() ? tip->height : 0, fork.generation);
    } else if (pending.has_value()) {
      fork = pending->fork;
      entries.insert(entries.begin(), pending->at);
    }
    if (entries.empty() && tip.has_value()) entries.push_back(*tip);  // re-confirm the tip
  }
  if (next.ok()) {
    QuorumOutcome out =
        entries.empty() ? election_->Renew(token) : election_->WriteHead(token, entries, fork);
    if (out.newer_fork.generation > fork.generation) {
      // A node applied a truncation this process has not seen (a leader died mid-re-org): adopt
      // it; the tip goes back to the fork point, and the next write carries the newer fork.
      std::lock_guard lock(mu_);
      spdlog::warn("elector {}: a lock node has a newer head-log fork {}; adopting it",
                   options_.name, out.newer_fork.ToString());
      AdoptFork(out.newer_fork);
      pending_fork_.reset();
      return;
    }
    Metrics().lock_nodes_answering.Set(static_cast<double>(out.accepted));
    (out.quorum ? Metrics().renewals : Metrics().renewal_failures).Inc();
    if (out.quorum) {
      {
        std::lock_guard lock(mu_);
        valid_until_ = started + (election_->options().ttl_ms - election_->drift_ms()) * 1000;
        if (fork.generation != fork_.generation) AdoptFork(fork);
        pending_fork_.reset();
        if (!entries.empty()) tip_ = entries.back();
      }
      if (on_write_ && !entries.empty()) on_write_(token, entries.back());
      // Entries below a quorum while leading: a node came back empty (its lock retaken by the
      // write above) or a write reached too few nodes. Incremental: reads what is new.
      Status repaired = Repair(token);
      if (!repaired.ok()) spdlog::warn("elector {}: {}", options_.name, repaired.message());
      // Catching up (a full batch): write the next one now rather than after a heartbeat.
      if (entries.size() == options_.max_entries_per_write) Wake();
    } else {
      if (out.deposed()) {
        StepDown("deposed: " + out.Summary(), /*release=*/true);
        return;
      }
      spdlog::warn("elector {}: head-log write of heights {}..{} short of a quorum: {}",
                   options_.name, entries.empty() ? 0 : entries.front().height,
                   entries.empty() ? 0 : entries.back().height, out.Summary());
      std::lock_guard lock(mu_);
      if (fork.generation != fork_.generation) pending_fork_ = PendingFork{fork, entries.front()};
    }
  }
  bool expired;
  {
    std::lock_guard lock(mu_);
    expired = env_->NowMicros() >= valid_until_;
  }
  if (expired) StepDown("the lease ran out without a successful head-log write", true);
}

void Elector::StepDown(const std::string& why, bool release, bool asked) {
  {
    std::lock_guard lock(mu_);
    valid_until_ = 0;  // LeaderToken() is nullopt from here on
    // A next term starts from what the nodes show (Repair adopts the newest truncation there).
    pending_fork_.reset();
  }
  // A stop the process asked for (a signal, the range done) is the normal end, not a warning.
  spdlog::log(asked ? spdlog::level::info : spdlog::level::warn, "elector {}: stepping down: {}",
              options_.name, why);
  if (release) {
    QuorumOutcome released = election_->Release();
    spdlog::info("elector {}: released the lock on {}", options_.name, released.Summary());
  }
  SetRole(Role::kFollower, 0);
}

void Elector::Subscribe(size_t node) {
  const std::string lock_key = election_->keys().election_lock();
  RedisOptions ro;
  ro.connect_timeout_ms = election_->nodes().options().node_timeout_ms;
  ro.command_timeout_ms = 1'000;
  ro.max_attempts = 1;
  bool warned = false;
  while (!stop_.load()) {
    auto conn = RedisConn::Connect(election_->nodes().url(node), ro);
    if (!conn.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      continue;
    }
    // Checked at start: without E (keyevent) and x/g (expired, del) nothing would arrive.
    auto config = (*conn)->Command({"CONFIG", "GET", "notify-keyspace-events"});
    if (config.ok() && config->elements.size() >= 2) {
      const std::string& flags = config->elements[1].str;
      bool ok = flags.find('E') != std::string::npos &&
                (flags.find('A') != std::string::npos ||
                 (flags.find('x') != std::string::npos && flags.find('g') != std::string::npos));
      if (!ok) {
        if (!warned) {
          spdlog::warn(
              "lock node {}: keyspace notifications are off (notify-keyspace-events '{}'); "
              "detecting a free lock by polling only (CONFIG SET notify-keyspace-events Egx)",
              election_->nodes().describe(node), flags);
          warned = true;
        }
        for (int i = 0; i < 40 && !stop_.load(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        continue;
      }
    }
    // Two patterns, two confirmations: the second is read (and skipped) by ReadPushed below.
    auto sub = (*conn)->Command({"PSUBSCRIBE", "__keyevent@*__:expired", "__keyevent@*__:del"});
    if (!sub.ok()) continue;
    while (!stop_.load()) {
      auto msg = (*conn)->ReadPushed(200);
      if (!msg.ok()) break;  // reconnect
      if (!msg->has_value()) continue;
      const RedisReply& m = **msg;
      // {"pmessage", pattern, "__keyevent@0__:expired", key}
      if (m.elements.size() != 4 || m.elements[3].str != lock_key) continue;
      const std::string& channel = m.elements[2].str;
      if (channel.ends_with(":expired") || channel.ends_with(":del")) {
        {
          std::lock_guard lock(mu_);
          ++stats_.notifications;
        }
        Wake();
      }
    }
  }
}

}  // namespace gapless
