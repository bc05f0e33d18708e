// The event subcommands: events tail, events replay (and consume, the consumers built on the
// framework of events/consumer.h).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <ctime>
#include <ostream>

#include "events/balances.h"
#include "events/event.h"
#include "events/kafka_bus.h"
#include "events/open_bus.h"
#include "node/commands.h"
#include "node/ops.h"
#include "node/startup.h"
#include "source/block_message.h"
#include "store/reader.h"
#include "store/retractions.h"

namespace gapless {

Result<Outcome> RunEventsTail(const EventsTailCommand& command, std::ostream& out) {
  SubscribeOptions options;
  char host[128] = {};
  gethostname(host, sizeof host - 1);
  options.group = fmt::format("gapless-tail-{}-{}", host, getpid());
  options.from_beginning = command.from_beginning;
  options.transient = true;
  const std::vector<std::string_view>& all = EventTypes();
  if (command.types.empty()) {
    for (std::string_view type : all) options.topics.push_back(EventTopic(type, command.chain_id));
  } else {
    for (const std::string& type : command.types) {
      if (std::find(all.begin(), all.end(), type) == all.end() && !IsDecodedEventType(type)) {
        return FailedPrecondition("--type " + type + ": not an event type (" +
                                  fmt::format("{}", fmt::join(all, ", ")) +
                                  ", or a decoded log's {schema}.{contract}.{event})");
      }
      options.topics.push_back(EventTopic(type, command.chain_id));
    }
  }
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<Subscriber> subscriber,
                           OpenSubscriber(command.bus, options));
  spdlog::info("tailing {} on {}", fmt::join(options.topics, ", "), subscriber->name());
  SignalStop signals;
  uint64_t seen = 0;
  while (!signals.flag().load() && (command.count == 0 || seen < command.count)) {
    Result<std::vector<Delivery>> batch = subscriber->Poll(256, 500);
    if (!batch.ok()) {
      if (batch.status().code() != Code::kUnavailable) return batch.status();
      spdlog::warn("{}", batch.status().ToString());
      usleep(500'000);
      continue;
    }
    for (const Delivery& d : *batch) {
      if (command.count == 0 || seen < command.count) {
        out << d.body << '\n';
        ++seen;
      }
      GAPLESS_RETURN_IF_ERROR(subscriber->Ack(d));
    }
    out.flush();
  }
  return command.count != 0 && seen >= command.count ? Outcome::kDone : Outcome::kStopped;
}

Result<Outcome> RunEventsReplay(const EventsReplayCommand& command) {
  if (command.from > command.to) {
    return FailedPrecondition(fmt::format("--from {} is above --to {}", command.from, command.to));
  }
  GAPLESS_ASSIGN_OR_RETURN(auto pool, OpenDatabase(command.db, 1));
  auto conn = pool->Acquire();
  GAPLESS_ASSIGN_OR_RETURN(uint64_t chain_id,
                           RecordedChainId(*conn, "the database holds no chain yet"));
  std::vector<std::unique_ptr<Publisher>> publishers;
  for (const std::string& url : command.buses) {
    Result<std::unique_ptr<Publisher>> p = OpenPublisher(url, command.publisher);
    if (!p.ok()) return p.status().WithContext("--bus");
    publishers.push_back(std::move(p).value());
  }
  SignalStop signals;
  uint64_t events = 0, blocks = 0;
  for (uint64_t at = command.from; at <= command.to && !signals.flag().load();) {
    uint64_t end = std::min(command.to, at + command.batch_blocks - 1);
    GAPLESS_ASSIGN_OR_RETURN(std::vector<BlockData> data,
                             ReadBlocks(*conn, at, end, kEventReadOptions));
    GAPLESS_ASSIGN_OR_RETURN(std::vector<OutgoingEvent> batch,
                             CommittedBlockEvents(*conn, chain_id, data, command.contracts.get()));
    for (auto& p : publishers) {
      // A broker that is down: retry the batch until it confirms or a signal comes.
      for (;;) {
        Status st = p->Publish(batch);
        if (st.ok()) break;
        if (st.code() != Code::kUnavailable || signals.flag().load()) {
          return st.WithContext(fmt::format("replaying blocks {}..{}", at, end));
        }
        spdlog::warn("{}; retrying", st.ToString());
        sleep(1);
      }
    }
    events += batch.size();
    blocks += data.size();
    at = end + 1;
  }
  spdlog::info("replayed {} events of {} stored blocks in {}..{}", events, blocks, command.from,
               command.to);
  return signals.flag().load() ? Outcome::kStopped : Outcome::kDone;
}

Result<Outcome> RunEventsPublish(const EventsPublishCommand& command, std::ostream& out) {
  const uint64_t now = static_cast<uint64_t>(time(nullptr));
  GAPLESS_ASSIGN_OR_RETURN(
      OutgoingEvent event,
      ProducerEvent(command.chain_id, command.type, command.identity, command.payload, now));
  for (const std::string& url : command.buses) {
    Result<std::unique_ptr<Publisher>> p = OpenPublisher(url, command.publisher);
    if (!p.ok()) return p.status().WithContext("--bus");
    GAPLESS_RETURN_IF_ERROR((*p)->Publish({event}));
  }
  out << event.event_id << '\n';
  return Outcome::kDone;
}

Result<Outcome> RunProduce(const ProduceCommand& command) {
  if (command.topic.empty()) return FailedPrecondition("--topic must not be empty");
  if (command.brokers.find("://") != std::string::npos) {
    return FailedPrecondition("--brokers takes host:port[,host:port...], not a URL");
  }
  auto rpc = MakeRpcClientFactory(command.rpc)();
  GAPLESS_ASSIGN_OR_RETURN(uint64_t from, ResolveBlockBound(*rpc, command.from));
  GAPLESS_ASSIGN_OR_RETURN(uint64_t to, ResolveBlockBound(*rpc, command.to));
  if (from > to) return FailedPrecondition(fmt::format("--from {} is above --to {}", from, to));
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<Publisher> publisher,
                           OpenPublisher("kafka://" + command.brokers, command.publisher));
  // A window of blocks goes to one partition, so one consumer receives it whole and writes it as
  // one range (node/kafka_worker.h).
  int partitions = 1;
  if (command.window > 0) {
    Result<int> count = KafkaPartitionCount("kafka://" + command.brokers, command.topic);
    if (!count.ok()) return count.status().WithContext("--topic");
    partitions = *count;
  }
  spdlog::info("producing blocks {}..{} from {} to topic {} on {}", from, to, rpc->Describe(),
               command.topic, publisher->name());
  SignalStop signals;
  uint64_t produced = 0;
  for (uint64_t at = from; at <= to && !signals.flag().load();) {
    uint64_t count = std::min<uint64_t>(command.batch, to - at + 1);
    GAPLESS_ASSIGN_OR_RETURN(std::vector<RawBlock> blocks, rpc->FetchBlocks(at, count));
    std::vector<OutgoingEvent> messages;
    for (const RawBlock& b : blocks) {
      OutgoingEvent m;
      m.topic = command.topic;
      m.key = std::to_string(b.number);
      m.event_type = "block";
      m.event_id = m.key;
      if (command.window > 0) {
        m.partition =
            static_cast<int32_t>((b.number / command.window) % static_cast<uint64_t>(partitions));
      }
      GAPLESS_ASSIGN_OR_RETURN(m.body, EncodeBlockMessage(b));
      messages.push_back(std::move(m));
    }
    for (;;) {
      Status st = publisher->Publish(messages);
      if (st.ok()) break;
      if (st.code() != Code::kUnavailable || signals.flag().load()) {
        return st.WithContext(fmt::format("producing blocks {}..{}", at, at + count - 1));
      }
      spdlog::warn("{}; retrying", st.ToString());
      sleep(1);
    }
    produced += blocks.size();
    at += count;
  }
  spdlog::info("produced {} blocks to {}", produced, command.topic);
  return signals.flag().load() ? Outcome::kStopped : Outcome::kDone;
}

Result<Outcome> RunConsumeBalances(const ConsumeBalancesCommand& command) {
  SubscribeOptions options;
  options.group = command.group;
  // Transfers and their retractions (re-orgs): two topics, in no order relative to each other;
  // the service is correct in any order (events/balances.h).
  options.topics = {EventTopic(kTokenTransfer, command.chain_id),
                    EventTopic(kBlockReverted, command.chain_id)};
  options.from_beginning = true;
  GAPLESS_ASSIGN_OR_RETURN(Ops ops, StartOps(command.metrics_addr));
  ops.SetStarting("opening the events bus");
  ops.Add("postgresql", PostgresProbe(command.db));
  ops.Add("processing-keys redis", RedisProbe(command.redis));
  ops.Add("events bus", BusProbe(command.bus, options), kBusProbeInterval);
  SignalStop signals;
  // The bus, the database and the processing keys' Redis may be away as the consumer (re)starts:
  // it waits for them (node/startup.h). A signal ends the wait.
  Result<std::unique_ptr<Subscriber>> opened = OpenWhenReachable<std::unique_ptr<Subscriber>>(
      "the events bus", [&] { return OpenSubscriber(command.bus, options); }, &signals.flag());
  if (!opened.ok() && signals.flag().load()) return Outcome::kStopped;
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<Subscriber> subscriber, std::move(opened));
  BalancesOptions balances;
  balances.pg_url = command.db;
  balances.redis_url = command.redis;
  balances.redis_key_prefix = "gapless:consumer:" + command.group;
  balances.consumer.name = command.group;
  balances.consumer.concurrency = command.concurrency;
  balances.consumer.status_interval_ms = command.status_interval_ms;
  // Block events in order (seed 004): a retracted block's block.reverted waits for the one before
  // it. The balances service itself is correct in any order; the option costs it only the
  // concurrency within block.reverted.
  for (const std::string& type : command.ordered_types) {
    if (type == "none") continue;
    balances.consumer.ordered_topics.push_back(type == "all" ? std::string("*")
                                                             : EventTopic(type, command.chain_id));
  }
  spdlog::info("consuming {} on {} as group {} into token_balances",
               fmt::join(options.topics, ", "), subscriber->name(), command.group);
  ops.SetStarted();
  // Unavailable from RunBalancesConsumer is its set-up's (EventConsumer::Run retries what fails
  // while it runs): the database or the processing keys' Redis is away.
  Status st = RetryWhileUnavailable(
      "the balances database or the processing keys' Redis",
      [&] { return RunBalancesConsumer(balances, subscriber.get(), signals.flag()); },
      &signals.flag());
  if (!st.ok() && !signals.flag().load()) return st;
  return Outcome::kStopped;
}

}  // namespace gapless
