// deployment: see deployment.h. The servers, the proxies, the timeline and the teardown.
#include "chaos/deployment/deployment.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "events/event.h"
#include "events/open_bus.h"
#include "rpc/curl_transport.h"
#include "store/migrate.h"
#include "store/partitions.h"
#include "testing/child_process.h"

namespace gapless::chaos {

int64_t MillisSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

std::unique_ptr<JsonRpcClient> Rpc(const std::string& url, bool traces) {
  CurlTransportOptions transport;
  transport.request_timeout_ms = 5'000;
  JsonRpcClientOptions options;
  options.max_attempts = 3;
  options.backoff_base_micros = 50'000;
  options.traces = traces;
  return std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(url, transport), options);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> CheckedTypes() {
  return {std::string(kBlockNew), std::string(kBlockReverted), std::string(kTokenTransfer)};
}

Result<std::unique_ptr<RedisConn>> ConnectAnyRole(const std::string& url) {
  RedisOptions any_role;
  any_role.require_primary = false;
  return RedisConn::Connect(url, any_role);
}

Deployment::Deployment(uint64_t seed, HarnessOptions options)
    : seed_(seed), options_(std::move(options)) {
  // Absolute: every path under it handed to a server or a process (certificates, logs, clock
  // files) must hold wherever that one runs from (redis-server changes into its --dir before it
  // loads its certificates; the default --work-dir is relative).
  std::error_code ec;
  const std::filesystem::path work = std::filesystem::absolute(options_.work_dir, ec);
  dir_ = fmt::format(
      "{}/seed-{}",
      (ec ? std::filesystem::path(options_.work_dir) : work).lexically_normal().string(), seed_);
}

void Deployment::Note(const std::string& what) {
  std::lock_guard<std::mutex> lock(note_mu_);
  timeline_ << fmt::format("{:>8} ms  {}\n", MillisSince(start_), what);
  timeline_.flush();
}

std::vector<TcpProxy*> Deployment::Links(const std::string& name) {
  std::vector<TcpProxy*> out;
  if (auto it = links_.find(name); it != links_.end()) out.push_back(it->second.get());
  if (auto it = kafka_links_.find(name); it != kafka_links_.end()) {
    for (const auto& proxy : it->second) out.push_back(proxy.get());
  }
  return out;
}

std::string Deployment::KafkaVia(const std::string& process) {
  auto& proxies = kafka_links_[process + ">kafka"];
  std::string map;
  const std::string& bootstrap = kafka_->bootstrap();  // "127.0.0.1:p1,127.0.0.1:p2,..."
  for (size_t at = 0; at < bootstrap.size();) {
    size_t end = bootstrap.find(',', at);
    if (end == std::string::npos) end = bootstrap.size();
    const std::string broker = bootstrap.substr(at, end - at);
    const int port = std::stoi(broker.substr(broker.rfind(':') + 1));
    proxies.push_back(std::make_unique<TcpProxy>("127.0.0.1", port));
    map += fmt::format("{}{}={}", map.empty() ? "" : ",", port, proxies.back()->port());
    at = end + 1;
  }
  return "GAPLESS_TEST_KAFKA_CONNECT=" + map;
}

std::string Deployment::Via(const std::string& process, const std::string& server, int port,
                            const std::string& scheme) {
  const std::string name = process + ">" + server;
  auto& proxy = links_[name];
  if (proxy == nullptr) proxy = std::make_unique<TcpProxy>("127.0.0.1", port);
  return fmt::format("{}://127.0.0.1:{}", scheme, proxy->port());
}

Status Deployment::CreateDatabase(const std::string& name, std::string* url) {
  GAPLESS_ASSIGN_OR_RETURN(auto admin, PgConn::Connect(admin_url_));
  GAPLESS_RETURN_IF_ERROR(admin->Exec("CREATE DATABASE " + PgQuoteIdent(name)));
  GAPLESS_ASSIGN_OR_RETURN(*url, PgUrlWithDatabase(admin_url_, name));
  // Partitions of kPartitionBlocks blocks, so that writes, re-orgs and rollbacks cross their
  // boundaries many times in a run (store/partitions.h).
  GAPLESS_ASSIGN_OR_RETURN(auto conn, PgConn::Connect(*url));
  GAPLESS_RETURN_IF_ERROR(Migrate(*conn));
  return SetPartitionBlocks(*conn, kPartitionBlocks);
}

std::string Deployment::BalancesUrl(const std::string& bus) const {
  // token_balances in a schema of the group's own, token_transfers read from public.
  return db_url_ + (db_url_.find('?') == std::string::npos ? "?" : "&") +
         "options=-csearch_path%3Dbalances_" + bus + "%2Cpublic";
}

Status Deployment::StartBuses() {
  for (const std::string& name : options_.buses) {
    Bus bus;
    bus.name = name;
    if (name == "redis") {
      GAPLESS_ASSIGN_OR_RETURN(bus_, RedisServer::Start());
      bus.url = bus_->url();
      // One link for both leaders: the relay names a bus by its URL (its cursor), so both
      // candidates must reach the bus at the same address.
      bus.relay_url = Via("leaders", "redis-bus", bus_->port(), "redis");
    } else if (name == "amqp") {
      GAPLESS_ASSIGN_OR_RETURN(amqp_, RabbitMqServer::Start());
      bus.url = amqp_->url();
      const std::string proxied = Via("leaders", "amqp", amqp_->port(), "amqp");
      bus.relay_url = "amqp://guest:guest@" + proxied.substr(proxied.find("//") + 2);
      // The harness's own queue, bound before anything is published: every event, for the
      // checks (a RabbitMQ queue holds only what was published after it was declared).
      SubscribeOptions tap;
      tap.group = "chaos-tap";
      tap.topics.clear();
      for (const std::string& type : CheckedTypes())
        tap.topics.push_back(EventTopic(type, kChainId));
      GAPLESS_ASSIGN_OR_RETURN(auto sub, OpenSubscriber(bus.url, tap));
      GAPLESS_RETURN_IF_ERROR(sub->Poll(1, 100).status().WithContext("chaos: the AMQP tap"));
    } else if (name == "kafka") {
      GAPLESS_ASSIGN_OR_RETURN(kafka_, KafkaMockCluster::Start(3));
      // The relay's links to the brokers are proxied per process (KafkaVia): both leaders must
      // name the bus by one URL (the relay's cursor).
      bus.url = bus.relay_url = kafka_->url();
      // Consumers do not create topics: the ones they subscribe to exist from the start.
      for (const std::string& type : CheckedTypes()) {
        GAPLESS_RETURN_IF_ERROR(kafka_->CreateTopic(EventTopic(type, kChainId), 1));
      }
    } else {
      return FailedPrecondition("chaos: unknown bus \"" + name + "\" (redis, amqp, kafka)");
    }
    auto conn = pool_->Acquire();
    GAPLESS_RETURN_IF_ERROR(conn->Exec("CREATE SCHEMA balances_" + name));
    buses_.push_back(std::move(bus));
  }
  return Status::Ok();
}

Status Deployment::StartCoordReplica() {
  GAPLESS_ASSIGN_OR_RETURN(coord_replica_, RedisServer::Start());
  GAPLESS_ASSIGN_OR_RETURN(auto conn, ConnectAnyRole(coord_replica_->url()));
  // Through the harness's link, so that a fault can make it lag; a restart of this server
  // (a coord-redis fault after a failover) brings it back as a primary, empty.
  return conn->Command({"REPLICAOF", "127.0.0.1", std::to_string(replication_->port())}).status();
}

Status Deployment::Setup() {
  // A directory an earlier run of this seed left (failed, slow, or --keep-logs) goes: the
  // processes append to their logs, and one-leader-per-epoch reads the leaders' logs whole.
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  std::filesystem::create_directories(dir_);
  timeline_.open(dir_ + "/timeline.txt", std::ios::trunc);
  start_ = Clock::now();
  if (options_.pg_admin_url.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(pg_, PgServer::Start());
    admin_url_ = pg_->url();
  } else {
    admin_url_ = options_.pg_admin_url;
  }
  GAPLESS_ASSIGN_OR_RETURN(coord_, RedisServer::Start());
  replication_ = std::make_unique<TcpProxy>("127.0.0.1", coord_->port());
  GAPLESS_RETURN_IF_ERROR(StartCoordReplica());
  GAPLESS_ASSIGN_OR_RETURN(consumer_keys_, RedisServer::Start());
  // Seeds 2, 3, 6, 7, ...: with --source mixed (odd seeds Kafka) TLS meets both sources.
  if (seed_ / 2 % 2 == 1) {
    GAPLESS_ASSIGN_OR_RETURN(lock_tls_, MakeTlsCertificates(dir_ + "/tls"));
  }
  for (int i = 0; i < 3; ++i) {
    GAPLESS_ASSIGN_OR_RETURN(auto node, lock_tls_.has_value() ? RedisServer::StartTls(*lock_tls_)
                                                              : RedisServer::Start());
    lock_nodes_.push_back(std::move(node));
  }
  const std::string tag = fmt::format("chaos_{}_{}", seed_, getpid());
  db_name_ = tag;
  clean_name_ = tag + "_clean";
  GAPLESS_RETURN_IF_ERROR(CreateDatabase(db_name_, &db_url_));
  GAPLESS_RETURN_IF_ERROR(CreateDatabase(clean_name_, &clean_url_));
  GAPLESS_ASSIGN_OR_RETURN(pool_, PgPool::Open(db_url_, 3));
  kafka_source_ = options_.source == "kafka" || (options_.source == "mixed" && seed_ % 2 == 1);
  compact_ = seed_ % 3 == 0;
  contracts_ = options_.contracts != "off";
  events_mode_ = !kafka_source_ && (options_.contracts == "events" ||
                                    (options_.contracts == "mixed" && seed_ % 4 == 0));
  // Events mode publishes no events yet (docs/contracts.md): no buses, no consumers.
  if (events_mode_) options_.buses.clear();
  GAPLESS_RETURN_IF_ERROR(StartBuses());
  if (kafka_source_) {
    if (kafka_ == nullptr) {
      GAPLESS_ASSIGN_OR_RETURN(kafka_, KafkaMockCluster::Start(3));
    }
    GAPLESS_RETURN_IF_ERROR(kafka_->CreateTopic(kBlockTopic, 4));
    // Where a Kafka worker dead-letters a message that is not a valid block (read at the end).
    GAPLESS_RETURN_IF_ERROR(kafka_->CreateTopic(std::string(kBlockTopic) + ".dlq", 1));
  }
  GAPLESS_RETURN_IF_ERROR(StartChain());
  if (contracts_) GAPLESS_RETURN_IF_ERROR(WriteContractsConfig());
  return StartFleet();
}

uint64_t Deployment::Tip() {
  auto n = rpc_->BlockNumber();
  return n.ok() ? *n : 0;
}

void Deployment::Teardown() {
  StopTraffic();
  for (std::thread& t : chain_ops_) t.join();
  chain_ops_.clear();
  StopProducer();
  for (auto& [name, p] : procs_) p.Kill();
  procs_.clear();
  for (std::thread& t : bus_ops_) t.join();
  bus_ops_.clear();
  kafka_.reset();
  amqp_.reset();
  links_.clear();
  kafka_links_.clear();
  rpc_fronts_.clear();
  if (anvil_pid_ > 0) {
    kill(anvil_pid_, SIGKILL);
    WaitForExit(anvil_pid_, 10);
    anvil_pid_ = -1;
  }
  pool_.reset();
  if (pg_ != nullptr) {
    pg_.reset();  // the whole server, its databases with it
    db_name_.clear();
  }
  if (!db_name_.empty()) {
    auto admin = PgConn::Connect(admin_url_);
    if (admin.ok()) {
      (void)(*admin)->Exec("DROP DATABASE IF EXISTS " + PgQuoteIdent(db_name_) + " WITH (FORCE)");
      (void)(*admin)->Exec("DROP DATABASE IF EXISTS " + PgQuoteIdent(clean_name_) +
                           " WITH (FORCE)");
    }
    db_name_.clear();
  }
}

}  // namespace gapless::chaos
