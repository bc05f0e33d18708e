// consumer: EventConsumer, the consumer framework's poll thread, workers and recovery
// (events/consumer.h), and the classes of failure. The processing keys are processing_locks.cc's;
// the status report's words are consumer_status.cc's.
#include "events/consumer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <thread>
#include <utility>

#include "core/metrics.h"

namespace gapless {

namespace {

// Deliveries by outcome (processed, duplicate, failed: an attempt that failed and is retried or
// stops the consumer, dead_lettered), for /metrics.
void CountConsumerEvent(const std::string& consumer, std::string_view outcome) {
  static Family<Counter>& events = MetricsRegistry::Default().CounterFamily(
      "gapless_consumer_events_total",
      "Event deliveries handled by the consumer, by outcome: processed, duplicate (completed "
      "before), failed (an attempt), dead_lettered",
      {"consumer", "outcome"});
  events.With({consumer, outcome}).Inc();
}

std::string PartitionName(const std::string& topic, int32_t partition) {
  return fmt::format("{}[{}]", topic, partition);
}

}  // namespace

const char* ErrorClassName(ErrorClass c) {
  switch (c) {
    case ErrorClass::kRateLimit:
      return "rate-limit";
    case ErrorClass::kNetwork:
      return "network";
    case ErrorClass::kDatabase:
      return "database";
    case ErrorClass::kOther:
      return "other";
  }
  return "other";
}

ErrorClass ClassifyError(const Status& status) {
  const std::string& r = status.reason();
  auto starts = [&r](std::string_view p) { return r.compare(0, p.size(), p) == 0; };
  // "http:429" is rpc/json_rpc.h HttpStatusReason(429); "rpc:rate-limited" its
  // kRpcRateLimitedReason. Spelled out here because events does not depend on rpc.
  if (r == "http:429" || r == "rpc:rate-limited" || r == kRateLimitedReason) {
    return ErrorClass::kRateLimit;
  }
  if (starts("sqlstate:") || starts("redis:")) return ErrorClass::kDatabase;
  if (starts("http:5") || status.code() == Code::kUnavailable) return ErrorClass::kNetwork;
  return ErrorClass::kOther;
}

int64_t RecoveryDelays::For(ErrorClass c) const {
  switch (c) {
    case ErrorClass::kRateLimit:
      return rate_limit_ms;
    case ErrorClass::kNetwork:
      return network_ms;
    case ErrorClass::kDatabase:
      return database_ms;
    case ErrorClass::kOther:
      return other_ms;
  }
  return other_ms;
}

// --- EventConsumer ---

struct EventConsumer::Item {
  Delivery delivery;
  int attempt = 0;   // failures so far
  uint64_t seq = 0;  // this consumer's number for the delivery, in the order it was polled
};

struct EventConsumer::Outcome {
  enum class Kind { kProcessed, kDuplicate, kHeld, kFailed, kMalformed, kStop };
  Item item;
  Kind kind = Kind::kProcessed;
  std::string event_id;
  Status error;
  ErrorClass cls = ErrorClass::kOther;
};

// The channel between the poll thread and the workers.
struct EventConsumer::Shared {
  std::mutex mu;
  std::condition_variable work_cv;  // workers wait for items
  std::condition_variable done_cv;  // the poll thread waits for outcomes
  std::deque<Item> work;
  std::deque<Outcome> done;
  bool closing = false;
  std::atomic<size_t> active{0};
  // The processing keys workers hold now: token -> event id (the poll thread renews them).
  std::map<std::string, std::string> held;
};

// Everything only the poll thread touches.
struct EventConsumer::PollState {
  std::deque<Item> pending;                         // polled, waiting for a slot
  std::vector<std::pair<int64_t, Item>> scheduled;  // (due micros, item): retries, rechecks
  std::map<std::pair<std::string, int32_t>, int64_t> paused;  // partition -> resume micros
  std::vector<int64_t> resting;  // rest-until micros, one per resting slot
  // Ordered partitions that are taken: partition -> the Item::seq holding it, from its dispatch
  // until it is done with (EndTurn).
  std::map<std::pair<std::string, int32_t>, uint64_t> turns;
  uint64_t next_seq = 0;
  size_t in_flight = 0;  // handed to workers, outcome not yet seen
  uint64_t processed = 0, duplicates = 0, failures = 0, dead_lettered = 0, acked = 0;
  std::string last_error;
  int64_t last_error_at = 0;
  int64_t start = 0;
  int64_t start_wall = 0;
  int64_t next_report = 0;
  int64_t next_renew = 0;
  int64_t poll_blocked_until = 0;
  Status fatal;
};

EventConsumer::EventConsumer(ConsumerOptions options, Subscriber* subscriber,
                             ProcessingLocks* locks, EventHandler* handler)
    : options_(std::move(options)),
      env_(options_.env != nullptr ? options_.env : Env::Default()),
      subscriber_(subscriber),
      locks_(locks),
      handler_(handler),
      shared_(std::make_unique<Shared>()) {
  if (options_.concurrency == 0) options_.concurrency = 1;
  if (options_.max_buffered == 0) options_.max_buffered = 2 * options_.concurrency;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  instance_id_ = fmt::format("{}-{}-{:x}", host, getpid(), env_->Uniform(uint64_t{1} << 48));
}

EventConsumer::~EventConsumer() = default;

ConsumerStatus EventConsumer::LastStatus() const {
  std::lock_guard<std::mutex> lock(status_mu_);
  return last_status_;
}

void EventConsumer::WorkerLoop() {
  Shared& sh = *shared_;
  while (true) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(sh.mu);
      sh.work_cv.wait(lock, [&] { return sh.closing || !sh.work.empty(); });
      if (sh.work.empty()) return;  // closing, and nothing left
      item = std::move(sh.work.front());
      sh.work.pop_front();
    }
    sh.active.fetch_add(1);
    Outcome out = Handle(std::move(item));
    sh.active.fetch_sub(1);
    {
      std::lock_guard<std::mutex> lock(sh.mu);
      sh.done.push_back(std::move(out));
    }
    sh.done_cv.notify_one();
  }
}

EventConsumer::Outcome EventConsumer::Handle(Item item) {
  Outcome out;
  auto envelope = ParseEnvelope(item.delivery.body);
  if (!envelope.ok()) {
    out.item = std::move(item);
    out.kind = Outcome::Kind::kMalformed;
    out.error = envelope.status();
    return out;
  }
  out.event_id = envelope->event_id;
  ConsumedEvent event{item.delivery, *envelope, item.attempt};

  auto fail = [&](const Status& st) {
    if (st.code() == Code::kFailedPrecondition || st.code() == Code::kDataLoss) {
      handler_->OnFailed(event, st, /*final=*/false);
      out.kind = Outcome::Kind::kStop;
    } else {
      handler_->OnFailed(event, st, /*final=*/item.attempt >= options_.max_retries);
      out.kind = Outcome::Kind::kFailed;
    }
    out.error = st;
    out.cls = handler_->Classify(st);
  };

  const std::string& id = envelope->event_id;
  std::string token = fmt::format("{}:{}", instance_id_, token_seq_.fetch_add(1) + 1);
  auto acquired = locks_->TryAcquire(id, token, options_.processing_ttl_ms);
  if (!acquired.ok()) {
    fail(acquired.status());
  } else if (!*acquired) {
    out.kind = Outcome::Kind::kHeld;
  } else {
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->held[token] = id;
    }
    // The key is released whatever happens below ("finally"); if the release fails the key
    // expires with its TTL.
    auto completed = handler_->IsCompleted(id);
    if (!completed.ok()) {
      fail(completed.status());
    } else if (*completed) {
      out.kind = Outcome::Kind::kDuplicate;
    } else if (Status st = handler_->Process(event); !st.ok()) {
      fail(st);
    } else if (Status mark = handler_->MarkCompleted(id); !mark.ok()) {
      fail(mark.WithContext("mark completed"));
    } else {
      handler_->OnSuccess(event);
      out.kind = Outcome::Kind::kProcessed;
    }
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->held.erase(token);
    }
    if (Status rel = locks_->Release(id, token); !rel.ok()) {
      spdlog::warn("consumer {}: {} (the key expires in {} ms)", options_.name, rel.ToString(),
                   options_.processing_ttl_ms);
    }
  }
  out.item = std::move(item);
  return out;
}

void EventConsumer::RenewKeys() {
  std::map<std::string, std::string> held;
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    held = shared_->held;
  }
  for (const auto& [token, id] : held) {
    auto renewed = locks_->Renew(id, token, options_.processing_ttl_ms);
    if (!renewed.ok()) {
      spdlog::warn("consumer {}: renewing the processing key of {}: {}", options_.name, id,
                   renewed.status().ToString());
    }
    // false: the attempt released the key meanwhile (the usual case), or the key expired (a
    // renewal came late); the completion record keeps the event applied once either way.
  }
}

bool EventConsumer::Ordered(const std::string& topic) const {
  for (const std::string& t : options_.ordered_topics) {
    if (t == "*" || t == topic) return true;
  }
  return false;
}

// Whether `item` may go to a worker now; takes its partition's turn if it is free. Pending
// deliveries of a partition are in the order they were polled and only the holder of the turn
// starts, so a partition's deliveries start one at a time, in that order.
bool EventConsumer::TakeTurn(const Item& item, PollState& st) {
  if (!Ordered(item.delivery.topic)) return true;
  auto [it, taken] = st.turns.try_emplace({item.delivery.topic, item.delivery.partition}, item.seq);
  return taken || it->second == item.seq;
}

// `item` is done with (acked, dead-lettered or given up): the next delivery of its partition may
// start.
void EventConsumer::EndTurn(const Item& item, PollState& st) {
  auto it = st.turns.find({item.delivery.topic, item.delivery.partition});
  if (it != st.turns.end() && it->second == item.seq) st.turns.erase(it);
}

void EventConsumer::OnOutcome(Outcome out, PollState& st) {
  const int64_t now = env_->NowMicros();
  st.in_flight--;
  Delivery& d = out.item.delivery;
  auto ack = [&] {
    if (Status s = subscriber_->Ack(d); !s.ok()) {
      // Not fatal: the bus delivers the event again and deduplication makes that a no-op.
      spdlog::warn("consumer {}: ack of {}@{} failed: {}", options_.name, d.topic, d.position,
                   s.ToString());
      st.last_error = "ack: " + s.ToString();
      st.last_error_at = now;
    } else {
      st.acked++;
    }
  };
  auto dead_letter = [&](const std::string& text) {
    if (Status s = subscriber_->DeadLetter(d, text); !s.ok()) {
      spdlog::error("consumer {}: dead-lettering {}@{} failed, left unacked: {}", options_.name,
                    d.topic, d.position, s.ToString());
      st.last_error = "dead letter: " + s.ToString();
      st.last_error_at = now;
      return;
    }
    st.dead_lettered++;
    CountConsumerEvent(options_.name, "dead_lettered");
    spdlog::error("consumer {}: dead-lettered {}@{}: {}", options_.name, d.topic, d.position, text);
    ack();
  };

  // An ordered partition's turn passes on when its delivery is acked or dead-lettered, and also
  // when dead-lettering fails: the delivery is then left to the bus, and the partition cannot
  // wait for a redelivery that may come only after a restart. A held delivery, one waiting for
  // its retry, and one that stops the consumer keep the turn.
  switch (out.kind) {
    case Outcome::Kind::kProcessed:
      spdlog::debug("consumer {}: event {} ({}@{}) processed", options_.name, out.event_id, d.topic,
                    d.position);
      st.processed++;
      CountConsumerEvent(options_.name, "processed");
      ack();
      EndTurn(out.item, st);
      return;
    case Outcome::Kind::kDuplicate:
      spdlog::debug("consumer {}: event {} ({}@{}) was completed before: acked as a duplicate",
                    options_.name, out.event_id, d.topic, d.position);
      st.duplicates++;
      CountConsumerEvent(options_.name, "duplicate");
      ack();
      EndTurn(out.item, st);
      return;
    case Outcome::Kind::kHeld:
      spdlog::debug(
          "consumer {}: event {} ({}@{}) is held by another consumer: looked at again "
          "in {} ms",
          options_.name, out.event_id, d.topic, d.position, options_.held_recheck_ms);
      st.scheduled.emplace_back(now + options_.held_recheck_ms * 1000, std::move(out.item));
      return;
    case Outcome::Kind::kMalformed:
      st.failures++;
      CountConsumerEvent(options_.name, "failed");
      st.last_error = out.error.ToString();
      st.last_error_at = now;
      dead_letter("event_id=unknown attempts=1 error=" + out.error.ToString());
      EndTurn(out.item, st);
      return;
    case Outcome::Kind::kStop:
      st.failures++;
      CountConsumerEvent(options_.name, "failed");
      st.last_error = fmt::format("event {}: {}", out.event_id, out.error.ToString());
      st.last_error_at = now;
      spdlog::error("consumer {}: stopping on {}", options_.name, st.last_error);
      if (st.fatal.ok()) st.fatal = out.error.WithContext("event " + out.event_id);
      return;
    case Outcome::Kind::kFailed:
      break;
  }

  st.failures++;
  CountConsumerEvent(options_.name, "failed");
  st.last_error = fmt::format("event {}: {}", out.event_id, out.error.ToString());
  st.last_error_at = now;
  const int64_t delay = options_.recovery.For(out.cls) * 1000;
  st.resting.push_back(now + delay);
  int64_t resume_at = 0;
  if (IsCritical(out.cls)) {
    auto key = std::make_pair(d.topic, d.partition);
    auto it = st.paused.find(key);
    if (it == st.paused.end()) {
      if (Status s = subscriber_->Pause(d.topic, d.partition); !s.ok()) {
        spdlog::warn("consumer {}: pause of {} failed: {}", options_.name,
                     PartitionName(d.topic, d.partition), s.ToString());
      }
      it = st.paused.emplace(key, now + delay).first;
      spdlog::warn("consumer {}: {} error, partition {} paused for {} ms", options_.name,
                   ErrorClassName(out.cls), PartitionName(d.topic, d.partition), delay / 1000);
    } else {
      it->second = std::max(it->second, now + delay);
    }
    resume_at = it->second;
  }
  const int attempts = out.item.attempt + 1;
  if (out.item.attempt >= options_.max_retries) {
    dead_letter(fmt::format("event_id={} attempts={} error={}", out.event_id, attempts,
                            out.error.ToString()));
    EndTurn(out.item, st);
    return;
  }
  spdlog::warn("consumer {}: event {} failed (attempt {}, {}): {}", options_.name, out.event_id,
               attempts, ErrorClassName(out.cls), out.error.ToString());
  // Retry n (n = attempts) waits retry_base * 2^(n-1), and never runs while its partition is
  // paused.
  int64_t due = now + options_.retry_base_ms * 1000 * (int64_t{1} << (attempts - 1));
  due = std::max(due, resume_at);
  out.item.attempt = attempts;
  st.scheduled.emplace_back(due, std::move(out.item));
}

ConsumerStatus EventConsumer::BuildStatus(PollState& st) {
  const int64_t now = env_->NowMicros();
  ConsumerStatus s;
  s.name = options_.name;
  s.active = shared_->active.load();
  s.resting = st.resting.size();
  s.capacity = options_.concurrency;
  s.queued = st.pending.size();
  for (const Item& item : st.pending) {
    if (!Ordered(item.delivery.topic)) continue;
    auto it = st.turns.find({item.delivery.topic, item.delivery.partition});
    if (it != st.turns.end() && it->second != item.seq) s.blocked++;
  }
  s.scheduled = st.scheduled.size();
  s.processed = st.processed;
  s.duplicates = st.duplicates;
  s.failures = st.failures;
  s.dead_lettered = st.dead_lettered;
  s.acked = st.acked;
  s.uptime_ms = (now - st.start) / 1000;
  s.per_minute =
      s.uptime_ms <= 0 ? 0.0 : static_cast<double>(st.processed) * 60'000.0 / s.uptime_ms;
  uint64_t attempts = st.processed + st.failures;
  s.success_ratio =
      attempts == 0 ? 1.0 : static_cast<double>(st.processed) / static_cast<double>(attempts);
  s.started_wall_micros = st.start_wall;
  s.partitions = subscriber_->Assignment();
  for (const auto& [key, due] : st.paused) s.paused.push_back(PartitionName(key.first, key.second));
  s.last_error = st.last_error;
  s.last_error_age_ms = st.last_error.empty() ? -1 : (now - st.last_error_at) / 1000;
  s.rss_bytes = static_cast<int64_t>(ProcessResidentBytes());  // core/metrics.h
  auto lag = subscriber_->Lag();
  if (lag.ok()) {
    s.lag = *lag;
    static Family<Gauge>& lag_gauge = MetricsRegistry::Default().GaugeFamily(
        "gapless_consumer_lag_events",
        "Events on the bus not yet consumed by this consumer's group, as last measured",
        {"consumer"});
    lag_gauge.With({options_.name}).Set(static_cast<double>(*lag));
  }
  return s;
}

void EventConsumer::Report(PollState& st) {
  ConsumerStatus s = BuildStatus(st);
  spdlog::info("{}", s.ToString());
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    last_status_ = s;
  }
  if (options_.on_status) options_.on_status(s);
}

Status EventConsumer::Run(const std::atomic<bool>& stop) {
  Shared& sh = *shared_;
  PollState st;
  st.start = env_->NowMicros();
  st.start_wall = env_->WallMicros();
  st.next_report = st.start + options_.status_interval_ms * 1000;
  const int64_t renew_every = std::max<int64_t>(1, options_.processing_ttl_ms / 3) * 1000;
  st.next_renew = st.start + renew_every;

  std::vector<std::thread> workers;
  for (size_t i = 0; i < options_.concurrency; ++i) workers.emplace_back([this] { WorkerLoop(); });
  spdlog::info(
      "consumer {}: started on {} with {} workers{}", options_.name, subscriber_->name(),
      options_.concurrency,
      options_.ordered_topics.empty()
          ? std::string()
          : fmt::format(", in order per partition: {}", fmt::join(options_.ordered_topics, ", ")));

  while (true) {
    // 1. Outcomes from the workers: ack, schedule retries, pause partitions.
    std::deque<Outcome> outcomes;
    {
      std::lock_guard<std::mutex> lock(sh.mu);
      outcomes.swap(sh.done);
    }
    for (Outcome& o : outcomes) OnOutcome(std::move(o), st);

    const bool stopping = stop.load() || !st.fatal.ok();
    if (stopping && st.in_flight == 0) break;
    int64_t now = env_->NowMicros();

    // 2. Timers: resumes, rests, retries, the report.
    for (auto it = st.paused.begin(); it != st.paused.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      if (Status s = subscriber_->Resume(it->first.first, it->first.second); !s.ok()) {
        spdlog::warn("consumer {}: resume of {} failed: {}", options_.name,
                     PartitionName(it->first.first, it->first.second), s.ToString());
      } else {
        spdlog::info("consumer {}: partition {} resumed", options_.name,
                     PartitionName(it->first.first, it->first.second));
      }
      it = st.paused.erase(it);
    }
    std::erase_if(st.resting, [now](int64_t until) { return until <= now; });
    // A retry never runs while its partition is paused, even when a later failure lengthened
    // the pause past the retry's due time; it goes with the resume.
    auto paused = [&st](const Item& item) {
      return st.paused.contains({item.delivery.topic, item.delivery.partition});
    };
    for (auto it = st.scheduled.begin(); it != st.scheduled.end();) {
      if (it->first <= now && !paused(it->second)) {
        st.pending.push_back(std::move(it->second));
        it = st.scheduled.erase(it);
      } else {
        ++it;
      }
    }
    if (now >= st.next_renew) {
      RenewKeys();
      st.next_renew = now + renew_every;
    }
    if (now >= st.next_report) {
      Report(st);
      st.next_report = now + options_.status_interval_ms * 1000;
    }

    // 3. Dispatch to free slots.
    if (!stopping) {
      size_t handed = 0;
      {
        std::lock_guard<std::mutex> lock(sh.mu);
        // In polled order; a delivery behind an earlier one of its ordered partition stays.
        for (auto it = st.pending.begin();
             it != st.pending.end() && st.in_flight + st.resting.size() < options_.concurrency;) {
          if (!TakeTurn(*it, st)) {
            ++it;
            continue;
          }
          spdlog::debug("consumer {}: {}@{} to a worker (attempt {})", options_.name,
                        it->delivery.topic, it->delivery.position, it->attempt + 1);
          sh.work.push_back(std::move(*it));
          it = st.pending.erase(it);
          st.in_flight++;
          handed++;
        }
      }
      if (handed == 1) sh.work_cv.notify_one();
      if (handed > 1) sh.work_cv.notify_all();
    }

    // 4. The next timer bounds every wait.
    int64_t next = std::min(st.next_report, st.next_renew);
    for (const auto& [due, item] : st.scheduled) {
      if (!paused(item)) next = std::min(next, due);  // else the resume below bounds the wait
    }
    for (const auto& [key, due] : st.paused) next = std::min(next, due);
    for (int64_t until : st.resting) next = std::min(next, until);
    if (st.poll_blocked_until > now) next = std::min(next, st.poll_blocked_until);
    int64_t idle_ms = std::clamp<int64_t>((next - now + 999) / 1000, 0, options_.poll_timeout_ms);

    // 5. Poll when there is room. While deliveries are in the workers the poll does not wait
    //    (virtual time must not move under them); it waits for their outcomes instead.
    bool polled_some = false;
    bool waited = false;
    //    Deliveries waiting for a retry count against the buffer too, so a run of failing or held
    //    events cannot make the consumer hold an unbounded number of deliveries.
    const size_t held = st.pending.size() + st.scheduled.size();
    if (!stopping && held < options_.max_buffered && now >= st.poll_blocked_until) {
      int64_t timeout = st.in_flight > 0 ? 0 : idle_ms;
      auto got = subscriber_->Poll(options_.max_buffered - held, timeout);
      waited = timeout > 0;
      if (!got.ok()) {
        st.last_error = "poll: " + got.status().ToString();
        st.last_error_at = env_->NowMicros();
        st.poll_blocked_until = st.last_error_at + options_.recovery.network_ms * 1000;
        spdlog::warn("consumer {}: {}; polling again in {} ms", options_.name, st.last_error,
                     options_.recovery.network_ms);
      } else {
        for (Delivery& d : *got) st.pending.push_back(Item{std::move(d), 0, ++st.next_seq});
        polled_some = !got->empty();
      }
    }
    if (polled_some) continue;
    if (st.in_flight > 0) {
      std::unique_lock<std::mutex> lock(sh.mu);
      sh.done_cv.wait_for(lock,
                          std::chrono::milliseconds(std::min<int64_t>(
                              10, std::max<int64_t>(1, options_.poll_timeout_ms))),
                          [&] { return !sh.done.empty(); });
    } else if (!waited && idle_ms > 0) {
      env_->SleepMicros(idle_ms * 1000);
    }
  }

  {
    std::lock_guard<std::mutex> lock(sh.mu);
    sh.closing = true;
  }
  sh.work_cv.notify_all();
  for (std::thread& t : workers) t.join();
  Report(st);
  spdlog::info("consumer {}: stopped ({} left unacked for redelivery)", options_.name,
               st.pending.size() + st.scheduled.size());
  return st.fatal;
}

}  // namespace gapless
