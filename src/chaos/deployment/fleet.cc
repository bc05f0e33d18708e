// fleet: the gapless processes of a chaos deployment (Deployment::StartFleet, deployment.h): the
// leaders, the workers, the Kafka workers and the balances consumers, each with its command line,
// a proxy on every link, its clock and its failpoints; the blocks indexed before events; the
// audit of stale writes; then the fleet started, leaders first.
#include <fmt/format.h>

#include <regex>

#include "chaos/deployment/deployment.h"
#include "testing/child_process.h"
#include "testing/free_port.h"

namespace gapless::chaos {

void Deployment::AddContracts(std::vector<std::string>* args) const {
  if (!contracts_) return;
  args->insert(args->end(), {"--contracts", contracts_file_});
  // Events mode proves its eth_getLogs answers whole (--verify-complete): re-orgs between the
  // logs, the headers and the receipts meet the proof.
  if (events_mode_) args->insert(args->end(), {"--data", "events", "--verify-complete"});
}

Status Deployment::StartFleet() {
  // host:port of the database URL, to point a process at its proxy instead.
  std::smatch hp;
  const std::regex host_port(R"(@?(127\.0\.0\.1|localhost|[^/@:]+):(\d+)/)");
  if (!std::regex_search(db_url_, hp, host_port)) {
    return FailedPrecondition("chaos: the PostgreSQL URL has no host:port: " + db_url_);
  }
  const int pg_port = std::stoi(hp[2]);
  const std::string pg_host_port = std::string(hp[1]) + ":" + std::string(hp[2]);
  // A process's RPC link: its proxy, then its RPC front (the HTTP-level faults), then anvil.
  auto RpcVia = [&](const std::string& process) {
    auto& front = rpc_fronts_[process];
    front = std::make_unique<RpcFront>(anvil_url_);
    return Via(process, "rpc", front->port(), "http");
  };

  // A worker's RPC pool (rpc/endpoint_pool.h): its front, through its link, and a spare front
  // straight to anvil (no link of its own, so the schedule's draws are unchanged), healthy while
  // an `rpc` fault hits the first: the pool fails over instead of the worker retrying. other-hash
  // reaches both (every worker front), as a lagging backend behind both would.
  auto RpcPoolOf = [&](const std::string& process) {
    std::string first = RpcVia(process);
    auto& spare = rpc_fronts_[process + kSpareSuffix];
    spare = std::make_unique<RpcFront>(anvil_url_);
    return first + ", http://127.0.0.1:" + std::to_string(spare->port()) + "/";
  };

  // The gapless processes, every link through a proxy of its own.
  std::vector<std::string> names = {"leader-a", "leader-b"};
  for (int i = 1; i <= options_.workers; ++i) names.push_back(fmt::format("worker-{}", i));
  // With the Kafka source: two Kafka workers besides (each also runs an RPC worker for gaps).
  if (kafka_source_) names.insert(names.end(), {"kworker-1", "kworker-2"});
  for (const std::string& name : names) {
    const bool leader = name.rfind("leader", 0) == 0;
    const bool kworker = name.rfind("kworker", 0) == 0;
    const std::string proxied = Via(name, "pg", pg_port, "postgresql");
    std::string pg = db_url_;
    pg.replace(pg.find(pg_host_port), pg_host_port.size(), proxied.substr(proxied.find("//") + 2));
    std::string locks;
    for (int i = 0; i < 3; ++i) {
      if (i > 0) locks += ",";
      locks += lock_tls_.has_value()
                   ? Via(name, fmt::format("lock-{}", i + 1), lock_nodes_[i]->port(), "rediss") +
                         "?cacertfile=" + lock_tls_->ca
                   : Via(name, fmt::format("lock-{}", i + 1), lock_nodes_[i]->port(), "redis");
    }
    Proc p;
    p.name = name;
    p.log = dir_ + "/" + name + ".log";
    p.args = {options_.gapless_bin,
              leader ? "leader" : "worker",
              "--rpc",
              leader ? RpcVia(name) : RpcPoolOf(name),
              "--db",
              pg,
              "--redis",
              Via(name, "coord", coord_->port(), "redis"),
              "--lock-nodes",
              locks,
              "--from",
              "0",
              "--to",
              "latest",
              "--range-size",
              std::to_string(kRangeSize),
              "--workers",
              leader ? "0" : "1",
              "--lease-ttl",
              std::to_string(options_.lease_ttl_ms),
              "--rpc-timeout",
              "2000",
              "--progress",
              "off",
              "--log-level",
              "info"};
    // RPC seeds index traces too (the Kafka stream carries none): written, re-orged and
    // compared with the clean run like every other table. Not in events mode (no blocks whole).
    if (!kafka_source_ && !events_mode_) p.args.push_back("--traces");
    AddContracts(&p.args);
    // worker-3 under a memory budget below its fixed needs: every range of 5 is fetched and
    // committed block by block (node/memory_budget.h), so kills, re-orgs and failovers meet
    // ranges half written in parts.
    // kworker-2 the same: every message is written as it comes, and what it polls is handed
    // back whenever a block it holds cannot be written yet (node/kafka_worker.h, Memory).
    if (name == "worker-3" || name == "kworker-2") {
      p.args.insert(p.args.end(), {"--memory-budget", "50"});
    }
    // worker-2 prefetches (node/worker.h, Prefetch): it holds a second task's lease while its
    // write runs, so kills, stops (it is the stale completer), re-orgs and failovers meet two
    // tasks in flight, one fetched ahead of the other's write.
    if (name == "worker-2") p.args.insert(p.args.end(), {"--prefetch", "on"});
    // The ops endpoint, scraped by the ops-* invariants (Check).
    p.metrics_port = StablePort();  // bound again at every restart
    p.args.insert(p.args.end(), {"--metrics-addr", fmt::format("127.0.0.1:{}", p.metrics_port)});
    if (leader) {
      // Partitions more than 20 blocks behind the head are indexed only once finished
      // (node/index_builder.h): builds run while processes are killed and re-orgs roll back.
      p.args.insert(p.args.end(), {"--index-near-head", "20"});
      p.args.insert(p.args.end(),
                    {"--follow", "--leader-ttl", "1500", "--max-reorg-depth",
                     std::to_string(std::max<uint64_t>(options_.max_reorg_depth * 2, 64))});
      if (compact_) p.args.insert(p.args.end(), {"--compact-after", "0"});
      std::string events;
      for (const Bus& bus : buses_) events += (events.empty() ? "" : ",") + bus.relay_url;
      if (!events.empty()) p.args.insert(p.args.end(), {"--events", events});
    }
    if (kafka_source_ && leader) {
      // Ranges missing from the stream this long are queued for the RPC workers.
      p.args.insert(p.args.end(), {"--source", "kafka", "--heal-gaps-after", "3000"});
    }
    if (kworker) {
      p.args.insert(p.args.end(),
                    {"--source", "kafka", "--brokers", kafka_->bootstrap(), "--topic", kBlockTopic,
                     "--group", "gapless-blocks", "--kafka-flush", "1000"});
    }
    if (!options_.mutation.empty()) p.env.push_back("GAPLESS_MUTATION=" + options_.mutation);
    // Its Kafka links (the relay to the Kafka bus, the block stream), a proxy per broker.
    if (kafka_ != nullptr && (kworker || leader)) {
      p.env.push_back(KafkaVia(name));
    }
    AddClock(&p, ClockFile(p.name));
    if (name == kStaleWriter) p.env.push_back("GAPLESS_FAILPOINTS=worker-stop-before-write");
    if (name == kStaleCompleter) {
      // Not at the first completion: that comes before the fault loop watches (the fleet
      // starting); the twelfth is some 20-40 s into the run with the RPC source.
      p.env.push_back("GAPLESS_FAILPOINTS=worker-stop-before-complete@12");
    }
    procs_[name] = std::move(p);
  }
  // Two balances consumers per bus, one group per bus, each group's token_balances in a schema
  // of its own. Each link through a proxy of its own: the bus, PostgreSQL, the consumers' Redis.
  for (const Bus& bus : buses_) {
    for (int i = 1; i <= 2; ++i) {
      Proc c;
      c.name = fmt::format("consumer-{}-{}", bus.name, i);
      c.log = dir_ + "/" + c.name + ".log";
      std::string bus_url = bus.url;
      if (bus.name == "redis") {
        bus_url = Via(c.name, "redis-bus", bus_->port(), "redis");
      } else if (bus.name == "amqp") {
        const std::string proxied = Via(c.name, "amqp", amqp_->port(), "amqp");
        bus_url = "amqp://guest:guest@" + proxied.substr(proxied.find("//") + 2);
      } else if (bus.name == "kafka") {
        c.env.push_back(KafkaVia(c.name));
      }
      std::string db = BalancesUrl(bus.name);
      const std::string pg_proxied = Via(c.name, "pg", pg_port, "postgresql");
      db.replace(db.find(pg_host_port), pg_host_port.size(),
                 pg_proxied.substr(pg_proxied.find("//") + 2));
      c.args = {options_.gapless_bin,
                "consume",
                "balances",
                "--bus",
                bus_url,
                "--group",
                "balances-" + bus.name,
                "--redis",
                Via(c.name, "keys", consumer_keys_->port(), "redis"),
                "--db",
                db,
                "--chain-id",
                std::to_string(kChainId),
                "--log-level",
                "debug"};  // each event's outcome, for a balances check that fails
      AddClock(&c, ClockFile(c.name));
      procs_[c.name] = std::move(c);
    }
  }
  // Part of the chain indexed without events first: 0..9, then 20..29 (a hole at 10..19).
  for (const auto& [from, to] : {std::pair<int, int>{0, 9}, {20, 29}}) {
    std::vector<std::string> index = {options_.gapless_bin,
                                      "index",
                                      "--rpc",
                                      anvil_url_,
                                      "--db",
                                      db_url_,
                                      "--from",
                                      std::to_string(from),
                                      "--to",
                                      std::to_string(to),
                                      "--range-size",
                                      std::to_string(kRangeSize),
                                      "--progress",
                                      "off"};
    if (!kafka_source_ && !events_mode_) index.push_back("--traces");
    AddContracts(&index);
    pid_t pid = SpawnChild(index, dir_ + "/index.log");
    const int code = WaitForExit(pid, 300);
    if (code != 0) {
      return Internal(fmt::format("gapless index {}..{} exited with {} (see {}/index.log)", from,
                                  to, code, dir_));
    }
  }
  {
    // The audit of stale writes (no-stale-write): a range's owner changing while its token did
    // not grow is a write the fence should have refused.
    auto conn = pool_->Acquire();
    GAPLESS_RETURN_IF_ERROR(conn->Exec(
        "CREATE TABLE chaos_stale_writes (from_block BIGINT, token BIGINT, old_owner TEXT, "
        "new_owner TEXT, at TIMESTAMPTZ DEFAULT now());\n"
        "CREATE FUNCTION chaos_audit_fence() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO chaos_stale_writes (from_block, token, old_owner, new_owner) VALUES "
        "(NEW.from_block, NEW.fence_token, OLD.fence_owner, NEW.fence_owner); RETURN NEW; END $$;\n"
        "CREATE TRIGGER chaos_audit_fence BEFORE UPDATE ON indexed_ranges FOR EACH ROW WHEN "
        "(OLD.fence_owner IS NOT NULL AND NEW.fence_owner IS NOT NULL AND NEW.fence_owner IS "
        "DISTINCT FROM OLD.fence_owner AND NEW.fence_token IS NOT DISTINCT FROM OLD.fence_token) "
        "EXECUTE FUNCTION chaos_audit_fence();"));
  }
  // Leaders first (they record the chain and enable events), then the rest.
  procs_["leader-a"].Start();
  procs_["leader-b"].Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1'500));
  for (auto& [name, p] : procs_) {
    if (p.pid <= 0) p.Start();
  }
  Note(fmt::format(
      "deployment started: {} gapless processes, {} proxied links, blocks from {}, lock nodes "
      "{}{}{}",
      procs_.size(), links_.size() + kafka_links_.size(), kafka_source_ ? "a Kafka stream" : "RPC",
      lock_tls_.has_value() ? "over TLS (rediss://)" : "plain",
      compact_ ? ", indexed_ranges compacted at once" : "",
      !contracts_    ? ""
      : events_mode_ ? ", contracts in events mode (--data events)"
                     : ", contracts decoded (a factory among them)"));
  return Status::Ok();
}

}  // namespace gapless::chaos
