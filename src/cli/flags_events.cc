// flags_events.cc: the flags about events (cli/flags.h): a leader's event relay (--events,
// --events-timeout, --mempool on index, run and leader), the events group (tail, replay,
// publish), produce (blocks of an RPC node into a Kafka block stream) and consume balances.
#include <cstdint>

#include "cli/flags.h"

namespace gapless::cli {

void AddEventsOptions(CLI::App* sub, Args* a) {
  sub->add_option("--events", a->events.events,
                  "Publish what is indexed as events to these buses, comma-separated: "
                  "kafka://host:port[,host:port], amqp[s]://user:pass@host:port/vhost, "
                  "redis[s]://host:port (enables the outbox in the database)");
  sub->add_option("--events-timeout", a->events.confirm_timeout_ms,
                  "How long a bus may take to confirm a batch of events, ms")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{600'000}));
  sub->add_flag("--mempool", a->events.mempool,
                "With --events: also publish transaction.pending for the transactions the node "
                "reports as pending (its pending-transaction filter), while leading");
}

void DefineEventsSubcommands(CLI::App* app, Args* a, Subcommands* out) {
  Subcommands& s = *out;
  s.events = app->add_subcommand("events",
                                 "Event buses: `events tail`, `events replay`, `events publish`");
  s.events->require_subcommand(1);
  s.events_tail = s.events->add_subcommand(
      "tail", "Print the envelopes arriving on a bus as JSON lines (a throw-away subscription)");
  {
    CLI::App* t = s.events_tail;
    AddConfigAndLogging(t, &a->common);
    t->add_option("--bus", a->events.bus, "Bus URL: kafka://..., amqp[s]://..., redis[s]://...")
        ->required();
    t->add_option("--chain-id", a->events.chain_id, "Chain of the topics ({type}.{chain_id})")
        ->required();
    t->add_option("--type", a->events.types,
                  "Event type, repeatable (block.new, transaction.confirmed, token.transfer, "
                  "transaction.pending, contract.verified); default: every type")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    t->add_flag("--from-beginning", a->events.from_beginning,
                "Also print what the bus still holds (Kafka, Redis); default: new events only");
    t->add_option("--count", a->events.count, "Exit after this many events (0: until Ctrl-C)")
        ->capture_default_str();
    DocumentEnv(t);
  }
  s.events_replay = s.events->add_subcommand(
      "replay",
      "Publish the events of committed blocks FROM..TO again, built from the database's rows "
      "(the same event ids as the first time)");
  {
    CLI::App* r = s.events_replay;
    AddCommon(r, &a->common);
    r->add_option("--bus", a->events.bus, "Bus URLs, comma-separated")->required();
    r->add_option("--from", a->events.from, "First block")->required();
    r->add_option("--to", a->events.to, "Last block")->required();
    r->add_option("--contracts", a->index.contracts,
                  "The contracts config (YAML) whose decoded events are published too, as the "
                  "relay of a run with it does (docs/contracts.md)");
    r->add_option("--events-timeout", a->events.confirm_timeout_ms,
                  "How long a bus may take to confirm a batch, ms")
        ->capture_default_str();
    DocumentEnv(r);
  }

  s.events_publish = s.events->add_subcommand(
      "publish",
      "Publish one event of another producer (e.g. contract.verified) in gapless's envelope; "
      "prints its event id");
  {
    CLI::App* p = s.events_publish;
    AddConfigAndLogging(p, &a->common);
    p->add_option("--bus", a->events.bus, "Bus URLs, comma-separated")->required();
    p->add_option("--chain-id", a->events.chain_id, "Chain of the event")->required();
    p->add_option("--type", a->events.type, "Event type, e.g. contract.verified")->required();
    p->add_option("--identity", a->events.identity,
                  "The object's key (e.g. the contract address): the event id is derived from "
                  "chain, type and identity, so publishing the same object again gives one id")
        ->required();
    p->add_option("--payload", a->events.payload, "The payload, a JSON object")->required();
    DocumentEnv(p);
  }

  s.produce = app->add_subcommand(
      "produce",
      "Publish blocks FROM..TO of an RPC node to a Kafka topic in the block-stream format "
      "(docs/kafka-blocks.md: one message per block with its receipts, key = block number)");
  {
    CLI::App* p = s.produce;
    AddConfigAndLogging(p, &a->common);
    p->add_option("--rpc", a->index.rpc, kRpcHelp)->required()->check(RpcListCheck());
    p->add_option("--brokers", a->events.brokers, "Kafka bootstrap servers, host:port[,host:port]")
        ->required();
    p->add_option("--topic", a->events.topic, "Kafka topic")->required();
    p->add_option("--from", a->index.from, "First block")->capture_default_str();
    p->add_option("--to", a->index.to, "Last block: a number, latest, safe or finalized")
        ->capture_default_str();
    p->add_option("--batch", a->index.batch, "Blocks per JSON-RPC batch and Kafka batch")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    p->add_option("--window", a->events.window,
                  "Blocks n with the same n / WINDOW go to one partition, (n / WINDOW) mod "
                  "partitions, so a Kafka worker with --range-size WINDOW gets each range whole; "
                  "0: the partitioner hashes the key")
        ->capture_default_str();
    p->add_option("--rpc-timeout", a->index.rpc_timeout_ms, "JSON-RPC request timeout, ms")
        ->capture_default_str()
        ->check(CLI::Range(1, 3'600'000));
    DocumentEnv(p);
  }

  s.consume = app->add_subcommand("consume", "Consumers built on gapless's consumer framework");
  s.consume->require_subcommand(1);
  s.consume_balances = s.consume->add_subcommand(
      "balances",
      "Keep token_balances (holder, token, token id, balance) in --db from the token.transfer "
      "events on --bus, each event applied once however often it is delivered");
  {
    CLI::App* c = s.consume_balances;
    AddCommon(c, &a->common);
    c->add_option("--bus", a->events.bus, "Bus URL: kafka://..., amqp[s]://..., redis[s]://...")
        ->required();
    c->add_option("--redis", a->events.redis,
                  "Redis URL for the processing keys (dedup while an event is being applied)")
        ->required();
    c->add_option("--chain-id", a->events.chain_id, "Chain of the token.transfer topic")
        ->required();
    c->add_option("--group", a->events.group,
                  "Consumer group (Kafka group, AMQP queue, stream group)")
        ->capture_default_str();
    c->add_option("--concurrency", a->events.concurrency, "Events applied at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    c->add_option("--status-interval", a->events.status_interval_s,
                  "Seconds between status reports in the log")
        ->capture_default_str()
        ->check(CLI::Range(1, 86'400));
    c->add_option("--ordered", a->events.ordered,
                  "Event types applied strictly in order within each partition (Kafka partition, "
                  "Redis stream, AMQP routing key), retries included: a later event waits while "
                  "an earlier one is retried, until it is applied or dead-lettered. "
                  "Comma-separated; all or none. Order holds per consumer: on Redis Streams and "
                  "RabbitMQ run one consumer per group where it matters")
        ->delimiter(',')
        ->capture_default_str()
        ->check(CLI::IsMember({"block.new", "transaction.confirmed", "token.transfer",
                               "transaction.pending", "contract.verified", "block.reverted", "all",
                               "none"}));
    AddMetricsAddr(c, &a->common);
    DocumentEnv(c);
  }
}

}  // namespace gapless::cli
