// deployment: one seed's whole deployment of real processes (docs/chaos.md, The deployment), and
// the handles through which the faults, the situations and the invariants act on it and read it:
// the servers (PostgreSQL, the coordination Redis and its replica, the lock nodes, the events
// buses, the consumers' Redis), the anvil chain with its traffic and, with the Kafka source, the
// block producer; the gapless processes; a TCP proxy on every link and an RPC front per process;
// and the timeline. Everything is private to the seed and torn down at its end.
//
// Where the parts are: deployment.cc starts the servers and the proxies and tears it all down;
// fleet.cc writes the gapless processes' command lines, indexes the first blocks and starts the
// fleet; chain.cc holds the chain: anvil, the traffic, re-orgs, the Kafka block producer.
// processes.h is one gapless process, rpc_front.h one process's RPC node.
//
// Thread-safety: one owner, the scenario's thread, except where a member says otherwise: the
// chain is shared with the traffic, the producer and the chain faults' threads under chain_mu_,
// the timeline (Note) is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chaos/deployment/processes.h"
#include "chaos/deployment/rpc_front.h"
#include "chaos/harness.h"
#include "coord/redis.h"
#include "core/status.h"
#include "rpc/json_rpc.h"
#include "store/pg.h"
#include "testing/kafka_mock.h"
#include "testing/pg_server.h"
#include "testing/rabbitmq_server.h"
#include "testing/redis_server.h"
#include "testing/tcp_proxy.h"
#include "testing/tls_certs.h"

namespace gapless::chaos {

using Clock = std::chrono::steady_clock;
inline constexpr uint64_t kChainId = 31337;  // anvil's
// Every gapless process's --range-size (the first `gapless index` too): the tasks' cut.
inline constexpr uint64_t kRangeSize = 5;
inline constexpr uint64_t kPartitionBlocks = 40;  // the databases' partition_blocks
// The block topic the harness produces to with the Kafka source.
inline constexpr const char* kBlockTopic = "blocks";
// The contracts mode (contracts.cc): the config's name (the decoded tables' schema) and the
// factory's event.
inline constexpr const char* kContractsSchema = "chaos";
inline constexpr const char* kChildCreatedSignature = "ChildCreated(address)";

int64_t MillisSince(Clock::time_point t);
// A JSON-RPC client of the harness's own (5 s timeout, 3 attempts).
std::unique_ptr<JsonRpcClient> Rpc(const std::string& url, bool traces = false);
std::string ReadText(const std::string& path);
// The events topics the checks read (and the balances consumers subscribe to part of).
std::vector<std::string> CheckedTypes();
// A connection to the coordination Redis's replica, or to a server of either role.
Result<std::unique_ptr<RedisConn>> ConnectAnyRole(const std::string& url);
// A token transfer to the emitter, as eth_sendTransaction and anvil_reorg take it.
// The deploy code of the emitter (every call logs an ERC-20 Transfer) and of the factory (every
// call creates an emitter and logs ChildCreated(child)), hex without 0x (contracts.cc).
std::string EmitterInitCode();
std::string FactoryInitCode();
std::string TokenCall(const std::string& from, const std::string& emitter, const std::string& to,
                      uint64_t amount);

class Deployment {
 public:
  // An events bus of the deployment (options_.buses).
  struct Bus {
    std::string name;       // "redis", "amqp", "kafka"
    std::string url;        // direct, for the consumers and the checks
    std::string relay_url;  // what the leaders publish to (through a proxy where one fits)
  };
  static constexpr const char* kStaleWriter = "worker-1";     // worker-stop-before-write
  static constexpr const char* kStaleCompleter = "worker-2";  // worker-stop-before-complete

  // dir: <options.work_dir>/seed-<seed>, absolute.
  Deployment(uint64_t seed, HarnessOptions options);
  ~Deployment() { Teardown(); }
  Deployment(const Deployment&) = delete;
  Deployment& operator=(const Deployment&) = delete;

  // Starts everything (the timeline's clock starts here); an error when a part does not start.
  Status Setup();
  // Stops everything it started (threads joined, processes killed, databases dropped).
  void Teardown();

  // A line of the timeline, with the milliseconds since the start. Thread-safe.
  void Note(const std::string& what);
  // The proxies of one link: one, or one per broker for a process's Kafka link.
  std::vector<TcpProxy*> Links(const std::string& name);
  // The chain's tip as the node says (0 when it does not answer).
  uint64_t Tip();
  // The database URL of a bus's balances consumers: their own schema, token_transfers read
  // from public.
  std::string BalancesUrl(const std::string& bus) const;
  // The file libfaketime reads a process's clock offset from (clock-skew faults).
  std::string ClockFile(const std::string& process) const { return dir_ + "/clock-" + process; }
  // A replica of the coordination Redis, following it through replication_.
  Status StartCoordReplica();

  // The chain (chain.cc).
  void StartTraffic();
  void StopTraffic();
  void StartProducer();
  void StopProducer();
  // A re-org down to `fork_point`: the producer sends the new fork's blocks from there.
  void ProduceAgainFrom(uint64_t fork_point);
  // A re-org `depth` deep, with new transactions in the new fork; call with chain_mu_ held.
  void ReorgChain(JsonRpcClient& rpc, uint64_t depth, int64_t salt);
  // Waits (up to 20 s, less when the run ends) until PostgreSQL stores a block with this hash.
  bool WaitStored(const std::string& hash);
  // The contracts mode (contracts.cc): a call to the factory, its child remembered for the
  // traffic; call with chain_mu_ held.
  void MakeChild(JsonRpcClient& rpc);
  // --contracts (and --data events) for a process indexing the chain, in the contracts mode.
  void AddContracts(std::vector<std::string>* args) const;

  uint64_t seed_;
  HarnessOptions options_;
  std::string dir_;
  std::ofstream timeline_;
  Clock::time_point start_;
  std::mutex note_mu_;

  std::unique_ptr<PgServer> pg_;  // when the harness runs its own server (pg-restart faults)
  std::string admin_url_;         // where the databases are created
  std::unique_ptr<RedisServer> coord_;
  // The coordination Redis's replica, following the primary through a link of the harness's own
  // (paused to make it lag); promoted by a coord-failover fault. Null between a failover and the
  // next replica's start.
  std::unique_ptr<RedisServer> coord_replica_;
  std::unique_ptr<TcpProxy> replication_;
  // The events buses: Redis Streams, RabbitMQ, the Kafka mock cluster; and the Redis of the
  // consumers' processing keys.
  std::vector<Bus> buses_;
  std::unique_ptr<RedisServer> bus_, consumer_keys_;
  std::unique_ptr<RabbitMqServer> amqp_;
  std::unique_ptr<KafkaMockCluster> kafka_;
  // The Kafka source: the block topic the harness produces to (a node-side producer that
  // follows the chain, re-producing from the fork point after a re-org).
  bool kafka_source_ = false;
  // Seeds 0 (mod 3): the leaders compact indexed_ranges at once (--compact-after 0, store/state.h
  // "Compaction"), so writes, re-orgs, failovers and stale writers meet merged rows below the
  // frontier; the `compacted` invariant checks that they did.
  bool compact_ = false;
  // The contracts mode (HarnessOptions::contracts, contracts.cc): every process indexes with
  // --contracts contracts_file_; in events mode (RPC seeds only) with --data events, and then
  // without buses or traces (events mode takes neither yet).
  bool contracts_ = false;
  bool events_mode_ = false;
  std::string contracts_file_;
  std::string factory_;                // the factory contract
  std::vector<std::string> children_;  // guarded by chain_mu_: the children the traffic made
  std::mutex produce_mu_;
  uint64_t produce_from_ = 0;        // guarded by produce_mu_
  uint64_t produce_generation_ = 0;  // guarded by produce_mu_: bumped by every re-org
  std::atomic<bool> producer_stop_{false};
  std::atomic<pid_t> producer_pid_{-1};
  std::thread producer_;
  // Flip-flop re-orgs run off the fault loop (each waits for the fleet to index a fork), holding
  // chain_mu_; re-org faults drawn meanwhile are skipped.
  std::vector<std::thread> chain_ops_;
  std::mutex amqp_mu_;                // RabbitMQ stops and starts take turns, off the fault loop
  std::vector<std::thread> bus_ops_;  // those stops and starts (joined at the teardown)
  std::vector<std::unique_ptr<RedisServer>> lock_nodes_;
  // Seeds 2, 3 (mod 4): the lock nodes serve TLS only (rediss://, a throwaway CA), so the leader's
  // quorum, its faults and the head-log invariants also run over TLS.
  std::optional<TlsCertificates> lock_tls_;
  pid_t anvil_pid_ = -1;
  std::string anvil_url_;
  std::unique_ptr<JsonRpcClient> rpc_;
  std::mutex chain_mu_;  // traffic and re-orgs take turns on the node
  std::string emitter_, account0_, account1_;
  std::string db_name_, db_url_, clean_name_, clean_url_;
  std::unique_ptr<PgPool> pool_;
  std::map<std::string, std::unique_ptr<RpcFront>> rpc_fronts_;  // by process
  std::map<std::string, std::unique_ptr<TcpProxy>> links_;
  std::map<std::string, std::vector<std::unique_ptr<TcpProxy>>> kafka_links_;  // by link name
  std::map<std::string, Proc> procs_;
  std::atomic<bool> traffic_stop_{false};
  std::thread traffic_;

 private:
  Status CreateDatabase(const std::string& name, std::string* url);
  Status StartChain();
  // Deploys a contract from account 0; its address (chain.cc).
  Result<std::string> Deploy(const std::string& init_code);
  // The contracts config and its ABIs in the seed's directory (contracts.cc).
  Status WriteContractsConfig();
  Status StartBuses();
  // The gapless processes (fleet.cc): their command lines, every link through a proxy of its
  // own; the blocks indexed before events; the stale-write audit; then the fleet started.
  Status StartFleet();
  // A process's link to a server through a proxy of its own, the link "<process>><server>";
  // returns the URL to give the process ("scheme://127.0.0.1:<proxy port>").
  std::string Via(const std::string& process, const std::string& server, int port,
                  const std::string& scheme);
  // A proxy per broker of the mock cluster, the link "<process>>kafka"; returns the
  // environment entry that sends the process's broker connections through them.
  std::string KafkaVia(const std::string& process);
};

}  // namespace gapless::chaos
