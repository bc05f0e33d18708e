// scale_bench: the scaling benchmark of issue 3. End-to-end transactions/s of the fleet (a Leader
// for a fixed range and N Workers, threads of this process, coordinating through a real Redis)
// with 1, 2 and 4 workers, against the single-process Indexer (no Redis) with the same number of
// fetch threads, over the same blocks from the same fast local RPC source, into the same
// PostgreSQL, in the same run. The ratio fleet / single-process is the cost of coordinating
// through Redis; the workers' timing counters (node/worker.h) show where their time goes.
//
// The RPC source is an in-process HttpTestServer that answers eth_getBlockByNumber(n, true),
// eth_getBlockReceipts(n), eth_chainId and eth_blockNumber (batches too) for every n of the range
// with mainnet block 17000000 and its receipts (the fixture decode_fixtures_test uses: 102
// transactions, 237 logs) re-stamped as block n: number, timestamp, block hash, parent hash (the
// hash of block n - 1, so the blocks chain and Verify passes) and transaction hashes (unique per
// block, so the hash index sees distinct keys as on mainnet), everywhere they occur in the block,
// its transactions, receipts and logs. The stamped blocks still prove against their headers
// (verify/verify.h, without senders: see FixtureBlock::Render), so `--verify off,on` runs every
// RPC, single and Kafka run once without and once with --verify (issue 10's benchmark) and
// reports the ratio. Token metadata is off (the node answers no eth_call; issue 18's cost of it is
// bench/traces_bench.sh's). Every answer is minified and rendered before the clock
// starts; a request then costs the server a parse of the small request and a copy of the
// prepared answers. The client side (curl, JSON scan, decode) is the real one.
//
// Each run writes into freshly truncated tables (after a CHECKPOINT); each fleet run uses a Redis
// namespace of its own (the keys of a chain id no chain uses; deleted afterwards). The clock runs
// from the start of the threads until the last of them has returned: for the fleet, the Leader
// (the frontier persisted past the last block) and every Worker (each returns at its first empty
// claim after that); for the Indexer, Plan() + Run(). So the fleet's clock includes what a fixed
// range costs it to start and to notice the end: up to one idle poll before the first seeding,
// up to one leader tick between the last commit and the frontier, up to one idle poll more for
// the workers to see it; --tick-ms and --idle-poll-ms set them. After each run, untimed: every
// block stored once and chained (store Verify), the transaction count, and the table checksums
// equal to those of the first run (all runs store the same rows).
//
// Time shares (fleet only): the WorkerCounters timing counters summed over the workers, as a
// share of the summed wall time of their Run calls. coord = Redis calls of the loop thread
// (fence-floor check, claim, renew before the write, complete, fail); idle = waiting for work
// (sleeping idle_poll_ms after an empty claim: before the leader's first seeding, at the end, and
// whenever there are fewer tasks left than workers); fetch = fetch + decode; write = the fenced
// PostgreSQL transaction; other = the rest, not measured (start-up and shutdown of each worker,
// dropping the decoded range, bookkeeping). The keeper thread's renewals and heartbeats are not
// counted (they run beside the loop on their own connection).
//
// The Kafka block source (issue 9, --sources ...,kafka): the same blocks, published before any
// clock starts to a topic of librdkafka's mock cluster (testing/kafka_mock.h, a helper process: 3
// brokers, 4 partitions) in the block-message format (source/block_message.h), block n in
// partition (n / range) mod 4 as `gapless produce --window range` sends it; then per run a Leader
// with blocks_from_stream (gaps only reported, never healed: no RPC workers here) and N
// KafkaWorkers (node/kafka_worker.h), each its own consumer in a consumer group of the run's own
// (so every run reads the topic from the beginning), windows of --range blocks. The clock runs
// from the start of the threads until the last has returned: the Leader once the frontier has
// passed the last block, each KafkaWorker at its first empty poll after that. It includes the
// consumers' group join (the mock's coordinator makes a new member wait out the session timeout,
// 4.5 s here; a real broker's group.initial.rebalance.delay.ms is 3 s) and their close: "after
// join" figures count from the first delivery to any worker instead. Time shares of a Kafka run
// (of the summed wall time of the workers' Run calls): join = Subscriber::Poll before the
// worker's first delivery; poll = Poll after it (waiting for librdkafka's fetcher, copying the
// messages out); decode = the worker's fetch_micros (decoding held blocks); write = its
// write_micros (the fenced transaction); ack = Subscriber::Ack (offset commits, asynchronous);
// close = closing the consumer (leaving the group); other = the rest: parsing each message's
// envelope, the Redis calls of a window (completion marker, range lock, extend, frontier record,
// marker, release), the committed-ranges query, connecting. Poll, Ack and close are timed by a
// Subscriber wrapper given through KafkaWorkerOptions::open_subscriber (the same options as the
// worker's own OpenSubscriber call).
//
// The raw write path (--sources ...,copy): the same rows (the blocks decoded before the clock),
// one transaction of raw COPY per range of --range blocks (bench/raw_copy.h, write_bench's
// baseline), over as many connections at once as each --workers count (PostgreSQL's own parallel
// limit: every fleet and single-process figure is also given as a ratio to the copy of the same
// N), into the truncated tables; verified like the other runs.
//
// Events on (issue 19, --events redis,kafka,amqp): per worker count, the RPC fleet once with events
// off and once per bus with the event relay on, in the same run (rotated per repetition like the
// other runs). Both are wired as `gapless run` wires its leader (node/fleet_command.cc), unlike the
// plain rpc runs: the Leader is woken by a PgWaker on the range-committed channel, and an "on" run
// adds EventRelays::Open (which enables events in the database, so every range write also inserts
// its outbox rows) with the bus's URL and EventsOptions' defaults, one relay thread under the
// leader's lease, started with the Leader. The buses: redis = Redis Streams on the --redis server
// (the coordination Redis; the three stream keys of chain 1 are deleted at the start and after
// each run); kafka = a mock cluster of 3 brokers of its own (testing/kafka_mock.h; one partition
// per topic, replicated 3 times, as events_bench); amqp = a private RabbitMQ node
// (testing/rabbitmq_server.h; skipped with a message when rabbitmq-server is not installed), with
// a durable consumer-group queue bound to the topics so that the persistent messages are stored as
// in production, drained (untimed) after each run. The indexing clock is the fleet's (from the
// start of the threads until the Leader and every Worker returned); the relay then publishes what
// is left: catch-up = from the end of indexing until the relay's cursor passed the last block.
// A sampler thread (its own connection; in the "off" runs too, so both pay for it) reads, after
// each NOTIFY of a range commit or a frontier move and at least every --sample-ms: the committed
// ranges (indexed_ranges), the persisted frontier, the bus's cursor (event_cursors.next_block,
// moved only after the broker confirmed the batch) and the events of the outbox rows between them.
// The backlog = frontier - cursor, in blocks and in events, is printed every 0.5 s. Per block:
// commit -> publish = from the first sample that saw its range committed (woken by the commit's
// NOTIFY, so within a query's round trip of the commit) to the first that saw the cursor past it
// (within --sample-ms of the confirmation and cursor commit); frontier -> publish, the relay's own
// share, from the first sample that saw the frontier past it. Percentiles over every block of every
// run of the bus and worker count. CPU seconds from the start until the relay caught up: of this
// process (getrusage: workers, leader, relay, the fixture node), of the PostgreSQL server (the
// postmaster's process tree, when it runs on this machine) and of the broker (redis-server, which
// also serves coordination; the mock's helper process; the RabbitMQ node), and per 1000 events
// what an on run spends beyond the off runs: where the time goes. The summary gives the ratio of
// the medians and the median of each repetition's own on/off ratio ("paired"). After each run:
// the stored rows as for every run, every block's events published (the relay's count), the
// outbox pruned empty.
//
// Usage: scale_bench [--pg URL] [--redis URL] [--blocks 1000] [--range 20] [--batch 10]
//                    [--workers 1,2,4] [--repeat 1] [--first 17000000] [--tick-ms 500]
//                    [--idle-poll-ms 200] [--sources rpc,single] [--kafka-timeout-s 600]
//                    [--verify off|on|off,on] [--events redis,kafka,amqp] [--sample-ms 10]
//                    [--events-timeout-s 600] [--prefetch on|off]
// --sources: which runs, any of rpc (the fleet of RPC workers), single (the Indexer), kafka (the
// Kafka fleet), copy (raw COPY), or none (only the --events runs); the default is the fleet
// against the single process. --events: also the events-off / events-on runs above, per bus.
// --pg names a server (the database gapless_scale_bench is created there and dropped at the end);
// --redis a server the caller owns. bench/scale_bench.sh starts both and runs this.
// --serve: render --blocks blocks from --first, print "serving URL" and answer RPC requests for
// them until SIGTERM or SIGINT; nothing else (no --pg, no --redis): the RPC source for a gapless
// process measured on its own (bench/memory_bench.sh).
#include <pthread.h>
#include <simdjson.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench_util.h"
#include "coord/keys.h"
#include "coord/redis.h"
#include "core/redact.h"
#include "decode/decode.h"
#include "events/bus.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "node/indexer.h"
#include "node/kafka_worker.h"
#include "node/leader.h"
#include "node/relay.h"
#include "node/worker.h"
#include "raw_copy.h"
#include "rpc/curl_transport.h"
#include "rpc/json_rpc.h"
#include "source/block_message.h"
#include "store/migrate.h"
#include "store/notify.h"
#include "store/outbox.h"
#include "store/pg.h"
#include "store/queries.h"
#include "store/writer.h"
#include "testing/http_test_server.h"
#include "testing/kafka_mock.h"
#include "testing/rabbitmq_server.h"
#include "verify/verify.h"

namespace gapless {
namespace {

using bench::Check;
using bench::Clock;
using bench::Die;
using bench::Percentile;
using bench::Seconds;

constexpr uint64_t kFixtureNumber = 17'000'000;
constexpr uint64_t kChainId = 1;  // the fixture's transactions carry mainnet's chainId
const char* const kTables[] = {"blocks", "withdrawals", "transactions", "logs", "token_transfers"};

struct Args {
  std::string pg = "postgresql://gapless@127.0.0.1:55633/postgres";
  std::string redis = "redis://127.0.0.1:56679";
  uint64_t blocks = 1000;  // ~420 MB of prepared answers; 6-15 s per run on 2 cores
  uint64_t range = 20;
  uint32_t batch = 10;
  std::vector<int> workers = {1, 2, 4};
  int repeat = 1;
  uint64_t first = kFixtureNumber;
  int64_t tick_ms = 500;       // LeaderOptions' default, as `gapless run` runs it
  int64_t idle_poll_ms = 200;  // WorkerOptions' default
  int64_t rpc_timeout_ms = 10'000;
  bool prefetch = false;  // --prefetch on|off: WorkerOptions::prefetch of the fleet's workers
  std::set<std::string> sources = {"rpc", "single"};
  // --verify off,on: each run of rpc, single and kafka once per value (issue 10's benchmark).
  std::vector<bool> verify = {false};
  int64_t kafka_timeout_s = 600;  // a Kafka run that has not finished by then is void (a hang)
  // The producer's compression.codec. librdkafka's mock keeps only the last 5 MB of each
  // partition (rd_kafka_mock_partition's max_size; no API sets it), so a topic of ~420 KB blocks
  // must be compressed to hold more than ~12 blocks a partition: zstd makes a block ~46 KB (~110
  // a partition). One message per batch, so each block is compressed on its own (the re-stamped
  // blocks are near-identical; compressed together they would shrink unrealistically).
  std::string kafka_compression = "zstd";
  bool verbose = false;  // the roles' info lines too (and GAPLESS_KAFKA_DEBUG's)
  // --serve: only the RPC source, for a `gapless` process of its own (bench/memory_bench.sh).
  bool serve = false;
  // --events: the buses of the events-on runs (redis, kafka, amqp); empty: no events runs.
  std::vector<std::string> events;
  int64_t sample_ms = 10;          // the events sampler's longest wait between two readings
  int64_t events_timeout_s = 600;  // a relay not caught up by then after indexing: void (a hang)
};

constexpr int kKafkaBrokers = 3;
constexpr int kKafkaPartitions = 4;
constexpr char kKafkaTopic[] = "blocks";
// The mock's group coordinator makes a new member wait out the session timeout: keep it short
// (as kafka_source_itest and events_bench do).
constexpr char kKafkaConsumerProps[] = "?session.timeout.ms=4500&heartbeat.interval.ms=1000";

std::vector<int> ParseList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int n = std::stoi(item);
    if (n <= 0) throw std::invalid_argument("worker counts must be > 0");
    out.push_back(n);
  }
  if (out.empty()) throw std::invalid_argument("empty list");
  return out;
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  bench::Flags()
      .Value("--pg", [&](const std::string& v) { a.pg = v; })
      .Value("--redis", [&](const std::string& v) { a.redis = v; })
      .Value("--blocks", [&](const std::string& v) { a.blocks = std::stoull(v); })
      .Value("--range", [&](const std::string& v) { a.range = std::stoull(v); })
      .Value("--batch",
             [&](const std::string& v) { a.batch = static_cast<uint32_t>(std::stoul(v)); })
      .Value("--workers", [&](const std::string& v) { a.workers = ParseList(v); })
      .Value("--repeat", [&](const std::string& v) { a.repeat = std::stoi(v); })
      .Value("--first", [&](const std::string& v) { a.first = std::stoull(v); })
      .Value("--tick-ms", [&](const std::string& v) { a.tick_ms = std::stoll(v); })
      .Value("--idle-poll-ms", [&](const std::string& v) { a.idle_poll_ms = std::stoll(v); })
      .Value("--prefetch",
             [&](const std::string& v) {
               if (v != "on" && v != "off") throw std::invalid_argument(v);
               a.prefetch = v == "on";
             })
      .Switch("--verbose", [&] { a.verbose = true; })
      .Switch("--serve", [&] { a.serve = true; })
      .Value("--kafka-compression", [&](const std::string& v) { a.kafka_compression = v; })
      .Value("--verify",
             [&](const std::string& v) {
               a.verify.clear();
               std::stringstream in(v);
               std::string item;
               while (std::getline(in, item, ',')) {
                 if (item != "off" && item != "on") throw std::invalid_argument(item);
                 a.verify.push_back(item == "on");
               }
               if (a.verify.empty()) throw std::invalid_argument(v);
             })
      .Value("--kafka-timeout-s", [&](const std::string& v) { a.kafka_timeout_s = std::stoll(v); })
      .Value("--sources",
             [&](const std::string& v) {
               a.sources.clear();
               std::stringstream in(v);
               std::string item;
               bool none = false;
               while (std::getline(in, item, ',')) {
                 if (item == "none") {
                   none = true;
                   continue;
                 }
                 if (item != "rpc" && item != "single" && item != "kafka" && item != "copy") {
                   throw std::invalid_argument(item);
                 }
                 a.sources.insert(item);
               }
               if (a.sources.empty() != none) throw std::invalid_argument(v);
             })
      .Value("--events",
             [&](const std::string& v) {
               a.events.clear();
               std::stringstream in(v);
               std::string item;
               while (std::getline(in, item, ',')) {
                 if (item != "redis" && item != "kafka" && item != "amqp") {
                   throw std::invalid_argument(item);
                 }
                 if (std::find(a.events.begin(), a.events.end(), item) == a.events.end()) {
                   a.events.push_back(item);
                 }
               }
               if (a.events.empty()) throw std::invalid_argument(v);
             })
      .Value("--sample-ms", [&](const std::string& v) { a.sample_ms = std::stoll(v); })
      .Value("--events-timeout-s",
             [&](const std::string& v) { a.events_timeout_s = std::stoll(v); })
      .Parse(argc, argv);
  if (a.sources.empty() && a.events.empty()) Die("--sources none needs --events");
  if (a.blocks == 0 || a.range == 0 || a.batch == 0 || a.repeat <= 0 || a.first == 0 ||
      a.tick_ms <= 0 || a.idle_poll_ms <= 0 || a.kafka_timeout_s <= 0 || a.sample_ms <= 0 ||
      a.events_timeout_s <= 0) {
    Die("--blocks, --range, --batch, --repeat, --first, --tick-ms, --idle-poll-ms, "
        "--kafka-timeout-s, --sample-ms, --events-timeout-s must be > 0");
  }
  return a;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Minify(const std::string& json) {
  std::string out(json.size(), '\0');
  size_t size = 0;
  if (simdjson::minify(json.data(), json.size(), out.data(), size) != simdjson::SUCCESS) {
    Die("cannot minify the fixture");
  }
  out.resize(size);
  return out;
}

// A node's answer to eth_getBlockByNumber(n, false): the block with each transaction as its hash
// (the JSON of a mainnet block shrinks ~10x). Fields keep their order and text.
std::string WithTransactionHashes(const std::string& block_json) {
  simdjson::dom::parser parser;
  simdjson::dom::object block;
  if (parser.parse(block_json).get(block) != simdjson::SUCCESS)
    Die("the fixture block is not JSON");
  std::string out = "{";
  for (auto field : block) {
    if (out.size() > 1) out.push_back(',');
    out.append("\"").append(field.key).append("\":");
    simdjson::dom::array txs;
    if (field.key != "transactions" || field.value.get(txs) != simdjson::SUCCESS) {
      out.append(simdjson::minify(field.value));
      continue;
    }
    out.push_back('[');
    for (simdjson::dom::element tx : txs) {
      std::string_view hash;
      if (tx["hash"].get(hash) != simdjson::SUCCESS) Die("a fixture transaction has no hash");
      if (out.back() != '[') out.push_back(',');
      out.append("\"").append(hash).append("\"");
    }
    out.push_back(']');
  }
  out.push_back('}');
  return out;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A 32-byte hash ("0x" + 64 hex digits) made unique to block n: its first 64 bits XORed with a
// mix of n. Distinct hashes stay distinct within a block, blocks get unrelated-looking (random
// as on mainnet, so index inserts land all over the B-tree) hashes, and the same (hash, n) always
// gives the same result, which is what lets block n's parentHash name block n - 1's hash.
std::string StampHash(std::string_view hash, uint64_t n) {
  if (hash.size() != 66) Die("not a 32-byte hash: " + std::string(hash));
  uint64_t head = 0;
  auto [p, ec] = std::from_chars(hash.data() + 2, hash.data() + 18, head, 16);
  if (ec != std::errc() || p != hash.data() + 18) Die("bad hash " + std::string(hash));
  char digits[17];
  std::snprintf(digits, sizeof digits, "%016llx",
                static_cast<unsigned long long>(head ^ SplitMix64(n)));
  return "0x" + std::string(digits) + std::string(hash.substr(18));
}

// Mainnet block 17000000 and its receipts, re-stamped as any block n (see the file comment).
class FixtureBlock {
 public:
  FixtureBlock() {
    const std::string dir = std::string(GAPLESS_FIXTURES_DIR) + "/mainnet/17000000/";
    block_ = Minify(ReadFile(dir + "block.json"));
    receipts_ = Minify(ReadFile(dir + "receipts.json"));
    simdjson::dom::parser parser;
    simdjson::dom::element b;
    if (parser.parse(block_).get(b) != simdjson::SUCCESS) Die("cannot parse the fixture block");
    hash_ = std::string(std::string_view(b["hash"]));
    parent_ = std::string(std::string_view(b["parentHash"]));
    number_ = std::string(std::string_view(b["number"]));
    timestamp_ = std::string(std::string_view(b["timestamp"]));
    auto ts = ParseHexQuantity(timestamp_);
    Check(ts.status(), "fixture timestamp");
    base_timestamp_ = *ts;
    transactions_root_ = std::string(std::string_view(b["transactionsRoot"]));
    for (simdjson::dom::element tx : b["transactions"].get_array()) {
      tx_hashes_.emplace_back(std::string_view(tx["hash"]));
    }
    if (HexQuantity(kFixtureNumber) != number_) Die("the fixture is not block 17000000");
    DecodeOptions options;
    options.expected_number = kFixtureNumber;
    options.expected_chain_id = kChainId;
    auto decoded = DecodeBlock(block_, receipts_, options);
    Check(decoded.status(), "decoding the fixture");
    decoded_ = std::move(decoded).value();
    // The JSON texts of each transaction's hash and r as the fixture has them (the model's are
    // lower-cased), by the model's hash: the keys Render replaces.
    for (simdjson::dom::element tx : b["transactions"].get_array()) {
      std::string hash{std::string_view(tx["hash"])};
      std::string lower = hash;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      tx_hashes_text_[lower] = hash;
      r_texts_[lower] = std::string(std::string_view(tx["r"]));
    }
    if (decoded_.transactions.size() != tx_hashes_.size() || r_texts_.size() != tx_hashes_.size()) {
      Die("the fixture's transactions are not unique by hash");
    }
    for (const Transaction& tx : decoded_.transactions) {
      if (!tx.r || tx.r->size() < 18 || r_texts_.at(tx.hash) != *tx.r) {
        Die("the fixture's r values are not canonical lower-case quantities");
      }
    }
  }

  size_t transactions() const { return tx_hashes_.size(); }
  // The events the relay publishes per block (block.new, transaction.confirmed, token.transfer;
  // no traces here): the outbox row's event_count (store/writer.cc OutboxInsert).
  size_t events_per_block() const {
    return 1 + decoded_.transactions.size() + decoded_.token_transfers.size();
  }

  // The parent hash of the first block rendered (its parent is not rendered).
  std::string ParentOfFirst(uint64_t first) const { return StampHash(hash_, first - 1); }

  // The block's and the receipts' JSON as block n, whose parent's hash is `parent_hash`; *hash is
  // block n's hash, the next block's parent. Every quoted 0x-string of the text equal to one of
  // the fixture's own values (number, timestamp, block/parent/transaction hash, each
  // transaction's r, transactionsRoot) is replaced; *replaced counts the replacements.
  //
  // The block still proves against its header (verify/verify.h, without senders), so --verify
  // can be measured on it: each transaction's r is changed (so its hash, unique per block as on
  // mainnet, is keccak of its new encoding), transactionsRoot is rebuilt from them, and the block
  // hash is keccak of the header with the new number, timestamp, parent hash and
  // transactionsRoot. The receipts do not hold r or any hash, so receiptsRoot and the blooms stay
  // the fixture's. A changed r no longer recovers the original sender: --verify-senders cannot
  // be measured on these blocks.
  void Render(uint64_t n, const std::string& parent_hash, std::string* block, std::string* receipts,
              size_t* replaced, std::string* hash) const {
    std::unordered_map<std::string_view, std::string> map;
    Block header = decoded_.block;
    header.number = n;
    header.timestamp = static_cast<uint64_t>(
        static_cast<int64_t>(base_timestamp_) +
        12 * (static_cast<int64_t>(n) - static_cast<int64_t>(kFixtureNumber)));
    header.parent_hash = parent_hash;
    map[number_] = HexQuantity(n);
    map[timestamp_] = HexQuantity(header.timestamp);
    map[parent_] = parent_hash;
    std::vector<Transaction> txs = decoded_.transactions;
    for (Transaction& tx : txs) {
      const std::string original_r = *tx.r;
      const std::string original_hash = tx.hash;
      tx.r = StampQuantity(original_r, n);
      auto new_hash = ComputeTransactionHash(tx);
      Check(new_hash.status(), "hash of a stamped transaction");
      tx.hash = *new_hash;
      map[r_texts_.at(original_hash)] = *tx.r;
      map[tx_hashes_text_.at(original_hash)] = tx.hash;
    }
    auto root = ComputeTransactionsRoot(txs);
    Check(root.status(), "transactionsRoot of the stamped block");
    header.transactions_root = *root;
    map[transactions_root_] = *root;
    auto block_hash = ComputeBlockHash(header);
    Check(block_hash.status(), "hash of the stamped block");
    *hash = *block_hash;
    map[hash_] = *hash;
    *replaced = 0;
    *block = Replace(block_, map, replaced);
    *receipts = Replace(receipts_, map, replaced);
  }

 private:
  static std::string Replace(const std::string& text,
                             const std::unordered_map<std::string_view, std::string>& map,
                             size_t* replaced) {
    std::string out;
    out.reserve(text.size() + text.size() / 16 + 64);  // + simdjson padding for the decoder
    size_t pos = 0;
    for (;;) {
      size_t open = text.find("\"0x", pos);
      if (open == std::string::npos) break;
      size_t close = text.find('"', open + 1);
      if (close == std::string::npos) break;
      std::string_view token(text.data() + open + 1, close - open - 1);
      auto it = map.find(token);
      out.append(text, pos, open + 1 - pos);
      if (it != map.end()) {
        out.append(it->second);
        ++*replaced;
      } else {
        out.append(token);
      }
      pos = close;
    }
    out.append(text, pos, std::string::npos);
    return out;
  }

  // A quantity (an r value, "0x" + up to 64 digits without leading zeros) made unique to block
  // n: its last 16 digits XORed with a mix of n. The length and the leading digit stay, so it is
  // still a canonical quantity of the same size.
  static std::string StampQuantity(const std::string& quantity, uint64_t n) {
    const size_t tail = quantity.size() - 16;
    uint64_t low = 0;
    auto [p, ec] =
        std::from_chars(quantity.data() + tail, quantity.data() + quantity.size(), low, 16);
    if (ec != std::errc() || p != quantity.data() + quantity.size()) Die("bad r " + quantity);
    char digits[17];
    std::snprintf(digits, sizeof digits, "%016llx",
                  static_cast<unsigned long long>(low ^ SplitMix64(n)));
    return quantity.substr(0, tail) + digits;
  }

  std::string block_, receipts_;
  std::string hash_, parent_, number_, timestamp_, transactions_root_;
  uint64_t base_timestamp_ = 0;
  std::vector<std::string> tx_hashes_;
  BlockData decoded_;
  std::unordered_map<std::string, std::string> tx_hashes_text_, r_texts_;  // by model hash
};

// The fast local RPC source: the prepared answers for blocks [first, first + count), served by an
// HttpTestServer. Above or below the range a block is null (like a node above its head).
class FixtureNode {
 public:
  FixtureNode(const FixtureBlock& fixture, uint64_t first, uint64_t count)
      : first_(first), blocks_(count), headers_(count), receipts_(count) {
    size_t expected = 0;
    std::string parent = fixture.ParentOfFirst(first);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t n = first + i;
      size_t replaced = 0;
      std::string hash;
      fixture.Render(n, parent, &blocks_[i], &receipts_[i], &replaced, &hash);
      headers_[i] = WithTransactionHashes(blocks_[i]);
      parent = hash;
      if (i == 0) expected = replaced;
      if (replaced != expected) Die("block " + std::to_string(n) + ": stamping differs");
      // What the indexer will check anyway, checked here so that a stamping bug shows as such.
      DecodeOptions options;
      options.expected_number = n;
      options.expected_chain_id = kChainId;
      auto data = DecodeBlock(blocks_[i], receipts_[i], options);
      Check(data.status(), "decoding the stamped fixture");
      if (data->transactions.size() != fixture.transactions()) Die("stamped block lost txs");
      // So that a --verify run measures verification, not retries of a block that cannot pass.
      Clock::time_point v0 = Clock::now();
      Check(VerifyBlock(*data), "verifying the stamped fixture");
      verify_seconds_ += Seconds(v0, Clock::now());
      bytes_ += blocks_[i].size() + receipts_[i].size();
    }
    head_ = HexQuantity(first + count - 1);
    // Block 0 (a whole process asks for its hash at start: node/app.cc): the fixture stamped as 0.
    if (first > 0) {
      std::string receipts, hash;
      size_t replaced = 0;
      fixture.Render(0, std::string("0x") + std::string(64, '0'), &genesis_, &receipts, &replaced,
                     &hash);
    }
    server_ = std::make_unique<HttpTestServer>(
        [this](const HttpTestServer::Request& req) { return Answer(req); });
  }

  std::string url() const { return server_->url(); }
  size_t bytes() const { return bytes_; }
  // VerifyBlock's time per block while preparing (one thread, nothing else running).
  double verify_ms_per_block() const {
    return 1000 * verify_seconds_ / static_cast<double>(blocks_.size());
  }
  int64_t requests() const { return server_->requests_received(); }
  // Block n's prepared answers as a raw block (copied): for the Kafka topic and the COPY rows.
  RawBlock Raw(uint64_t n) const {
    const size_t i = n - first_;
    RawBlock b;
    b.number = n;
    b.block_json = blocks_[i];
    b.receipts_json = receipts_[i];
    return b;
  }

 private:
  // One call's answer after its id: `head` (,"result": or a whole ,"error":{...}) and the
  // prepared JSON of the result, if any (a view of blocks_ or receipts_: not copied twice).
  struct Tail {
    std::string head;
    std::string_view prepared;
  };

  HttpTestServer::Response Answer(const HttpTestServer::Request& req) const {
    thread_local simdjson::dom::parser parser;  // the handler runs on the connection threads
    simdjson::dom::element doc;
    if (parser.parse(req.body).get(doc) != simdjson::SUCCESS) {
      return HttpTestServer::Response::Json(R"({"jsonrpc":"2.0","id":null,"error":)"
                                            R"({"code":-32700,"message":"parse error"}})");
    }
    std::vector<simdjson::dom::element> calls;
    const bool batch = doc.is_array();
    if (batch) {
      for (simdjson::dom::element c : doc.get_array()) calls.push_back(c);
    } else {
      calls.push_back(doc);
    }
    std::vector<Tail> tails(calls.size());
    size_t total = 2;
    for (size_t i = 0; i < calls.size(); ++i) {
      tails[i] = Answer(calls[i]);
      total += tails[i].head.size() + tails[i].prepared.size() + 48;
    }
    std::string body;
    body.reserve(total);
    if (batch) body.push_back('[');
    for (size_t i = 0; i < calls.size(); ++i) {
      if (i > 0) body.push_back(',');
      int64_t id = 0;
      if (calls[i]["id"].get(id) != simdjson::SUCCESS) id = 0;  // the client always sends one
      body.append(R"({"jsonrpc":"2.0","id":)");
      body.append(std::to_string(id));
      body.append(tails[i].head);
      body.append(tails[i].prepared);
      body.push_back('}');
    }
    if (batch) body.push_back(']');
    return HttpTestServer::Response::Json(std::move(body));
  }

  Tail Answer(simdjson::dom::element call) const {
    std::string_view method;
    if (call["method"].get(method) != simdjson::SUCCESS) method = "";
    simdjson::dom::array params;
    const bool has_params = call["params"].get(params) == simdjson::SUCCESS;
    if (method == "eth_chainId") return {R"(,"result":")" + HexQuantity(kChainId) + "\"", {}};
    if (method == "eth_blockNumber") return {R"(,"result":")" + head_ + "\"", {}};
    if (method != "eth_getBlockByNumber" && method != "eth_getBlockReceipts") {
      return {R"(,"error":{"code":-32601,"message":"method not found"})", {}};
    }
    std::string_view tag;
    Result<uint64_t> n = InvalidData("no block number");
    if (has_params && params.at(0).get(tag) == simdjson::SUCCESS) n = ParseHexQuantity(tag);
    if (!n.ok()) return {R"(,"error":{"code":-32602,"message":"invalid block number"})", {}};
    if (*n == 0 && !genesis_.empty() && method == "eth_getBlockByNumber") {
      return {R"(,"result":)", genesis_};
    }
    if (*n < first_ || *n - first_ >= blocks_.size()) return {R"(,"result":null)", {}};
    const size_t i = *n - first_;
    if (method == "eth_getBlockReceipts") return {R"(,"result":)", receipts_[i]};
    bool full = false;
    if (!has_params || params.at(1).get(full) != simdjson::SUCCESS) {
      return {R"(,"error":{"code":-32602,"message":"the full flag is missing"})", {}};
    }
    // full=false (a leader's head tracker reads headers): transaction hashes, as a node answers
    // (until 2026-11-28 this was the full block, ~10x the JSON: bench/RESULTS.md).
    return {R"(,"result":)", full ? blocks_[i] : headers_[i]};
  }

  uint64_t first_;
  std::vector<std::string> blocks_, headers_, receipts_;
  std::string genesis_;  // block 0, full, for any `full` flag
  std::string head_;
  size_t bytes_ = 0;
  double verify_seconds_ = 0;
  std::unique_ptr<HttpTestServer> server_;
};

RpcClientFactory Clients(const std::string& url, int64_t timeout_ms) {
  return [url, timeout_ms] {
    CurlTransportOptions transport;
    transport.request_timeout_ms = timeout_ms;
    return std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(url, transport));
  };
}

void Reset(PgConn& conn) {
  Check(conn.Exec("TRUNCATE blocks, withdrawals, transactions, logs, token_transfers,"
                  " indexed_ranges"),
        "truncate");
  Check(conn.Exec("DELETE FROM indexer_state WHERE key = 'frontier'"), "reset frontier");
  Check(conn.Exec("CHECKPOINT"), "checkpoint");
}

// Untimed, after a run: every block once and chained, all transactions there, the same rows as
// every other run (*reference: the first run's checksums).
void CheckStored(PgConn& conn, const Args& args, uint64_t txs,
                 std::map<std::string, std::string>* reference) {
  const uint64_t last = args.first + args.blocks - 1;
  auto report = Verify(conn, args.first, last);
  Check(report.status(), "verify");
  if (!report->ok() || report->blocks_found != args.blocks) Die("verify: " + report->Render());
  auto n = conn.Query("SELECT count(*) FROM transactions");
  Check(n.status(), "count");
  if (n->Get(0, 0) != std::to_string(txs))
    Die("stored " + std::string(n->Get(0, 0)) + " transactions");
  std::map<std::string, std::string> sums;
  for (const char* table : kTables) {
    auto sum = TableChecksum(conn, table, args.first, last);
    Check(sum.status(), "checksum");
    sums[table] = *sum;
  }
  if (reference->empty()) *reference = sums;
  if (sums != *reference) Die("a run stored other rows than the first run");
}

// CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat; -1 if unknown.
double ProcessCpuSeconds(pid_t pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');  // the command name may contain spaces
  if (paren == std::string::npos) return -1;
  std::stringstream fields(text.substr(paren + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {  // field 3 is the state; 14 utime, 15 stime
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds of a process and all its descendants (a broker's helper processes), from /proc;
// -1 if unknown.
double ProcessTreeCpuSeconds(pid_t root) {
  const double own = ProcessCpuSeconds(root);
  if (own < 0) return -1;
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 4 >= text.size()) continue;
    std::stringstream fields(text.substr(paren + 2));
    std::string state;
    long ppid = 0;
    if (fields >> state >> ppid) children[static_cast<pid_t>(ppid)].push_back(std::stoi(name));
  }
  double total = own;
  std::vector<pid_t> todo = children[root];
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (const double cpu = ProcessCpuSeconds(pid); cpu > 0) total += cpu;
    for (pid_t c : children[pid]) todo.push_back(c);
  }
  return total;
}

// ---- events on (--events) ----------------------------------------------------------------------

// One reading of the EventsSampler.
struct EventsSample {
  double t = 0;                 // seconds since the run's start
  uint64_t frontier = 0;        // the persisted frontier (the first block before there is one)
  uint64_t cursor = 0;          // the bus's next block (the first block before its first publish)
  uint64_t backlog_events = 0;  // the events of the outbox rows in [cursor, frontier)
};

// What an events run measured beside the fleet's figures.
struct EventsFigures {
  std::vector<EventsSample> samples;
  // Per block, milliseconds (see the file comment).
  std::vector<double> commit_to_publish, frontier_to_publish;
  double catch_up = 0;     // seconds from the end of indexing until the cursor passed the end
  uint64_t events = 0;     // the relay's count of events published (confirmed)
  double broker_cpu = -1;  // the broker's CPU seconds during the run; -1: unknown
  // CPU seconds during the run (indexing and catch-up) of this process (workers, leader, relay,
  // the fixture node) and of the PostgreSQL server (its processes on this machine); -1: unknown.
  double bench_cpu = -1, pg_cpu = -1;
  double wall = 0;  // seconds from the start until the relay caught up (the indexing clock if off)
  int rep = 0;      // the repetition (pairs an on run with the off run of its repetition)
  uint64_t max_backlog_blocks = 0, max_backlog_events = 0;  // over the indexing clock
  uint64_t end_backlog_blocks = 0, end_backlog_events = 0;  // at the end of indexing
};

// A fleet run as an events run: wired as `gapless run` wires its leader (the file comment).
struct EventsRun {
  std::string bus_url;  // the relay's bus (an --events URL); empty: events off
  pid_t broker = -1;    // the broker's process, for its CPU seconds; -1: not measured
  pid_t postgres = -1;  // the PostgreSQL server's postmaster, for its CPU seconds; -1: not measured
};

// CPU seconds (user + system) of this process so far.
double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

// The sampler of an events run: on a thread of its own with its own connection, one query after
// each NOTIFY of a range commit or a frontier move, and at least every sample_ms. Stop() takes one
// last reading.
class EventsSampler {
 public:
  EventsSampler(const std::string& db_url, uint64_t first, uint64_t last, int64_t sample_ms)
      : sample_ms_(sample_ms) {
    auto conn = PgConn::Connect(db_url);
    Check(conn.status(), "sampler connection");
    conn_ = std::move(conn).value();
    auto waker =
        PgWaker::Open(db_url, {std::string(kRangeCommittedChannel), std::string(kFrontierChannel)});
    Check(waker.status(), "sampler LISTEN connection");
    waker_ = std::move(waker).value();
    const std::string f = std::to_string(first);
    const std::string frontier =
        "coalesce((SELECT value::bigint FROM indexer_state WHERE key = 'frontier'), " + f + ")";
    const std::string cursor = "coalesce((SELECT min(next_block) FROM event_cursors), " + f + ")";
    sql_ = "SELECT " + frontier + ", " + cursor +
           ", (SELECT coalesce(sum(event_count), 0) FROM event_outbox WHERE block_number >= " +
           cursor + " AND block_number < " + frontier +
           "), (SELECT string_agg(from_block || '-' || to_block, ',') FROM indexed_ranges WHERE "
           "from_block BETWEEN " +
           f + " AND " + std::to_string(last) + ")";
  }
  void Start(Clock::time_point start) {
    start_ = start;
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        Sample();
        waker_->Wait(sample_ms_);
      }
      Sample();
    });
  }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  const std::vector<EventsSample>& samples() const { return samples_; }
  // By each committed range's first block: its last block, and the seconds since the start when
  // it was first seen committed.
  const std::map<uint64_t, std::pair<uint64_t, double>>& committed() const { return committed_; }

 private:
  void Sample() {
    auto r = conn_->Query(sql_);
    Check(r.status(), "sampler query");
    const double t = Seconds(start_, Clock::now());
    EventsSample s;
    s.t = t;
    s.frontier = std::stoull(std::string(r->Get(0, 0)));
    s.cursor = std::stoull(std::string(r->Get(0, 1)));
    s.backlog_events = std::stoull(std::string(r->Get(0, 2)));
    samples_.push_back(s);
    if (!r->IsNull(0, 3)) {
      std::stringstream in{std::string(r->Get(0, 3))};
      std::string item;
      while (std::getline(in, item, ',')) {
        const size_t dash = item.find('-');
        committed_.emplace(std::stoull(item.substr(0, dash)),
                           std::make_pair(std::stoull(item.substr(dash + 1)), t));
      }
    }
  }

  int64_t sample_ms_;
  std::unique_ptr<PgConn> conn_;
  std::unique_ptr<PgWaker> waker_;
  std::string sql_;
  Clock::time_point start_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<EventsSample> samples_;
  std::map<uint64_t, std::pair<uint64_t, double>> committed_;
};

// The backlog of a sample (frontier - cursor; 0 when the cursor is at or past the frontier).
uint64_t BacklogBlocks(const EventsSample& s) {
  return s.frontier > s.cursor ? s.frontier - s.cursor : 0;
}

// The per-block latencies and backlog figures of an events-on run from its sampler's readings;
// `indexing_end`: seconds from the start to the end of the indexing clock.
void EventsLatencies(const Args& args, const EventsSampler& sampler, double indexing_end,
                     EventsFigures* out) {
  const uint64_t last = args.first + args.blocks - 1;
  std::vector<double> commit(args.blocks, -1);
  for (const auto& [from, range] : sampler.committed()) {
    const auto& [to, t] = range;
    for (uint64_t n = from; n <= std::min(to, last); ++n) {
      double& c = commit[n - args.first];
      if (c < 0 || t < c) c = t;
    }
  }
  out->samples = sampler.samples();
  uint64_t next_frontier = args.first, next_cursor = args.first;  // blocks not yet seen passed
  std::vector<double> frontier(args.blocks, -1), published(args.blocks, -1);
  for (const EventsSample& s : out->samples) {
    for (; next_frontier < s.frontier && next_frontier <= last; ++next_frontier) {
      frontier[next_frontier - args.first] = s.t;
    }
    for (; next_cursor < s.cursor && next_cursor <= last; ++next_cursor) {
      published[next_cursor - args.first] = s.t;
    }
    if (s.t <= indexing_end) {
      out->max_backlog_blocks = std::max(out->max_backlog_blocks, BacklogBlocks(s));
      out->max_backlog_events = std::max(out->max_backlog_events, s.backlog_events);
      out->end_backlog_blocks = BacklogBlocks(s);
      out->end_backlog_events = s.backlog_events;
    }
  }
  for (uint64_t i = 0; i < args.blocks; ++i) {
    if (commit[i] < 0 || frontier[i] < 0 || published[i] < 0) {
      Die("events sampler: block " + std::to_string(args.first + i) +
          " was not seen committed, below the frontier and published");
    }
    out->commit_to_publish.push_back(1000 * (published[i] - commit[i]));
    out->frontier_to_publish.push_back(1000 * (published[i] - frontier[i]));
  }
}

// The backlog every 0.5 s of the run as "blocks/events" (the last reading at or before each
// point), with "|" at the end of indexing.
std::string BacklogSeries(const EventsFigures& e, double indexing_end) {
  std::string out;
  size_t i = 0;
  bool marked = false;
  const double end = e.samples.empty() ? 0 : e.samples.back().t;
  for (double t = 0.5; t < end + 0.5; t += 0.5) {
    while (i + 1 < e.samples.size() && e.samples[i + 1].t <= t) ++i;
    if (!marked && t > indexing_end) {
      out += "| ";
      marked = true;
    }
    const EventsSample& s = e.samples[i];
    char buf[48];
    std::snprintf(buf, sizeof buf, "%llu/%.1fk ", static_cast<unsigned long long>(BacklogBlocks(s)),
                  static_cast<double>(s.backlog_events) / 1000);
    out += buf;
  }
  return out;
}

struct FleetResult {
  double seconds = 0;
  uint64_t transactions = 0;
  uint64_t tasks = 0;
  double worker_seconds = 0;  // summed wall time of the workers' Run calls
  double coord = 0, idle = 0, fetch = 0, write = 0, backoff = 0;  // seconds, summed
  uint64_t retries = 0, failed = 0, leases_lost = 0;
  EventsFigures events;  // an events run's (RunFleet's `events`)
};

void DeleteNamespace(RedisConn& redis, const Keys& keys) {
  std::string cursor = "0";
  do {
    auto r = redis.Command({"SCAN", cursor, "MATCH", keys.prefix() + "*", "COUNT", "1000"});
    Check(r.status(), "scan");
    if (r->type != RedisReply::Type::kArray || r->elements.size() != 2) Die("bad SCAN reply");
    cursor = r->elements[0].str;
    if (!r->elements[1].elements.empty()) {
      std::vector<std::string> argv = {"DEL"};
      for (const auto& k : r->elements[1].elements) argv.push_back(k.str);
      Check(redis.Command(argv).status(), "del");
    }
  } while (cursor != "0");
}

void CheckNamespaceEmpty(RedisConn& admin, const Keys& keys) {
  auto r = admin.Command({"SCAN", "0", "MATCH", keys.prefix() + "*", "COUNT", "1000"});
  Check(r.status(), "scan");
  if (r->elements.size() != 2 || !r->elements[1].elements.empty()) {
    Die("namespace " + keys.prefix() + " is not empty");
  }
}

// `events`: nullptr for a plain fleet run; else an events run (off or on), its figures in the
// result's `events`.
FleetResult RunFleet(const Args& args, int workers, bool verify, const std::string& db_url,
                     const std::string& rpc_url, RedisConn& admin, int64_t ns,
                     const EventsRun* events = nullptr) {
  const Keys keys(ns);
  CheckNamespaceEmpty(admin, keys);
  const bool relay_on = events != nullptr && !events->bus_url.empty();
  // + 1 for the relay's step (its LISTEN connection is its own).
  auto pool = PgPool::Open(db_url, static_cast<size_t>(workers) + 2 + (relay_on ? 1 : 0));
  Check(pool.status(), "pool");

  LeaderOptions lo;
  lo.from = args.first;
  lo.to = args.first + args.blocks - 1;
  lo.range_size = args.range;
  lo.tick_ms = args.tick_ms;
  lo.holder_id = "scale-bench";
  LocalLease lease;
  Leader leader(lo, args.redis, keys, pool->get(), &lease);
  std::unique_ptr<PgWaker> leader_waker;
  std::unique_ptr<EventRelays> relays;
  std::unique_ptr<EventsSampler> sampler;
  if (events != nullptr) {
    // As `gapless run` wires its leader (node/fleet_command.cc): woken when a range commits.
    auto waker = PgWaker::Open(db_url, {std::string(kRangeCommittedChannel)}, (*pool)->options());
    Check(waker.status(), "the leader's LISTEN connection");
    leader_waker = std::move(waker).value();
    leader.set_waker(leader_waker.get());
    if (relay_on) {
      // As `gapless run --events URL` opens them (EventsOptions' defaults): enables events in the
      // database from the first block on, so every range write from now on adds outbox rows.
      EventsOptions eo;
      eo.buses = {events->bus_url};
      auto opened = EventRelays::Open(eo, pool->get(), kChainId, lo.from, lo.to, &lease,
                                      Clients(rpc_url, args.rpc_timeout_ms));
      Check(opened.status(), "open the event relay");
      relays = std::move(opened).value();
    }
    sampler = std::make_unique<EventsSampler>(db_url, args.first, args.first + args.blocks - 1,
                                              args.sample_ms);
  }

  std::atomic<bool> stop{false};
  std::atomic<bool> leader_done{false};
  std::vector<std::unique_ptr<Worker>> fleet;
  for (int i = 0; i < workers; ++i) {
    WorkerOptions w;
    w.worker_id = "scale-bench:" + std::to_string(getpid()) + ":" + std::to_string(i);
    w.rpc_timeout_ms = args.rpc_timeout_ms;
    w.idle_poll_ms = args.idle_poll_ms;
    w.blocks_per_request = args.batch;
    w.prefetch = args.prefetch;
    w.chain_id = kChainId;
    if (verify) w.verify = VerifyOptions{};
    w.token_metadata = false;  // the fixture node answers no eth_call (see the header)
    w.done = [&leader_done] { return leader_done.load(); };
    fleet.push_back(std::make_unique<Worker>(
        w, RpcBlockSources(Clients(rpc_url, args.rpc_timeout_ms)), args.redis, keys, pool->get()));
  }

  Status leader_status;
  std::vector<Status> worker_status(fleet.size());
  std::vector<double> worker_seconds(fleet.size());
  const double cpu_before = events != nullptr ? ProcessTreeCpuSeconds(events->broker) : -1;
  const double pg_before = events != nullptr ? ProcessTreeCpuSeconds(events->postgres) : -1;
  const double self_before = SelfCpuSeconds();
  Clock::time_point start = Clock::now();
  if (sampler) sampler->Start(start);
  if (relays) relays->Start(stop);
  std::thread leader_thread([&] {
    leader_status = leader.Run(stop);
    leader_done.store(true);
  });
  std::vector<std::thread> threads;
  for (size_t i = 0; i < fleet.size(); ++i) {
    threads.emplace_back([&, i] {
      Clock::time_point t0 = Clock::now();
      worker_status[i] = fleet[i]->Run(stop);
      worker_seconds[i] = Seconds(t0, Clock::now());
      // A worker that stopped early (FailedPrecondition) would leave the others to finish; a
      // benchmark run with a failed worker is void, so stop them all.
      if (!worker_status[i].ok()) stop.store(true);
    });
  }
  leader_thread.join();
  for (std::thread& t : threads) t.join();
  Clock::time_point end = Clock::now();
  Check(leader_status, "leader");
  for (const Status& st : worker_status) Check(st, "worker");
  if (!leader.done()) Die("the leader stopped before the range was done");
  EventsFigures figures;
  if (relays) {
    // Indexing is done; the relay publishes what is left (the catch-up).
    const Clock::time_point deadline = end + std::chrono::seconds(args.events_timeout_s);
    while (!relays->done() && relays->FirstError().ok() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const Clock::time_point caught_up = Clock::now();
    if (!relays->done()) stop.store(true);
    Check(relays->Join(), "the event relay");
    if (!relays->done()) {
      Die("the relay has not published the range " + std::to_string(args.events_timeout_s) +
          " s after indexing ended");
    }
    figures.catch_up = Seconds(end, caught_up);
    figures.events = relays->events_published();
  }
  if (sampler) {
    sampler->Stop();
    if (relay_on) {
      EventsLatencies(args, *sampler, Seconds(start, end), &figures);
    } else {
      figures.samples = sampler->samples();
    }
    const double cpu_after = ProcessTreeCpuSeconds(events->broker);
    if (cpu_before >= 0 && cpu_after >= 0) figures.broker_cpu = cpu_after - cpu_before;
    const double pg_after = ProcessTreeCpuSeconds(events->postgres);
    if (pg_before >= 0 && pg_after >= 0) figures.pg_cpu = pg_after - pg_before;
    figures.bench_cpu = SelfCpuSeconds() - self_before;
    figures.wall = Seconds(start, end) + figures.catch_up;
  }

  FleetResult r;
  r.seconds = Seconds(start, end);
  r.events = std::move(figures);
  auto secs = [](const std::atomic<uint64_t>& micros) { return static_cast<double>(micros) / 1e6; };
  for (size_t i = 0; i < fleet.size(); ++i) {
    const WorkerCounters& c = fleet[i]->counters();
    r.transactions += c.transactions;
    r.tasks += c.tasks;
    r.retries += c.retries;
    r.failed += c.failed;
    r.leases_lost += c.leases_lost;
    r.coord += secs(c.coord_micros);
    r.idle += secs(c.idle_micros);
    r.fetch += secs(c.fetch_micros);
    r.write += secs(c.write_micros);
    r.backoff += secs(c.backoff_micros);
    r.worker_seconds += worker_seconds[i];
  }
  DeleteNamespace(admin, keys);
  return r;
}

// The topics of chain 1's block events (what BlockEvents gives for the fixture's blocks).
std::vector<std::string> EventTopics() {
  return {EventTopic(kBlockNew, kChainId), EventTopic(kTransactionConfirmed, kChainId),
          EventTopic(kTokenTransfer, kChainId)};
}

// A bus of the events-on runs, started before any clock starts.
struct EventsBus {
  std::string kind;  // redis, kafka, amqp
  std::string url;   // as --events takes it
  pid_t pid = -1;    // the broker's process (for its CPU seconds)
  std::unique_ptr<KafkaMockCluster> kafka;
  std::unique_ptr<RabbitMqServer> rabbit;
};

// amqp: the durable consumer-group queue bound to the events' topics.
constexpr char kEventsQueue[] = "scale-bench-events";

// nullptr when the bus cannot be had here (RabbitMQ not installed), after saying why.
std::unique_ptr<EventsBus> StartEventsBus(const std::string& kind, const Args& args,
                                          pid_t redis_pid) {
  auto bus = std::make_unique<EventsBus>();
  bus->kind = kind;
  if (kind == "redis") {
    bus->url = args.redis;
    bus->pid = redis_pid;
  } else if (kind == "kafka") {
    auto started = KafkaMockCluster::Start(kKafkaBrokers);
    Check(started.status(), "start the Kafka mock cluster for events");
    bus->kafka = std::move(started).value();
    // One partition per topic (the key, the chain id, picks one anyway), replicated on every
    // broker, as events_bench.
    for (const std::string& topic : EventTopics()) {
      Check(bus->kafka->CreateTopic(topic, 1, kKafkaBrokers), "create an events topic");
      Check(bus->kafka->SetLeader(topic, 0, 1), "set the topic's leader");
    }
    bus->url = bus->kafka->url();
    bus->pid = bus->kafka->pid();
  } else {
    auto started = RabbitMqServer::Start();
    if (!started.ok()) {
      std::printf("events amqp: skipped (no RabbitMQ: %s)\n", started.status().ToString().c_str());
      return nullptr;
    }
    bus->rabbit = std::move(started).value();
    bus->url = bus->rabbit->url();
    bus->pid = bus->rabbit->pid();
    // RabbitMQ keeps only what a bound queue takes: a durable consumer-group queue, as a
    // consumer in production would have, declared and bound by the first DrainEventsBus and
    // drained by each one after a run.
  }
  return bus;
}

// Untimed, before and after each events run: the bus holds none of the run's events any more
// (Redis: the streams deleted; RabbitMQ: the queue drained; the Kafka mock keeps only the last 5
// MB of a partition anyway). Returns the events drained from the RabbitMQ queue.
uint64_t DrainEventsBus(EventsBus& bus, RedisConn& admin) {
  uint64_t drained = 0;
  if (bus.kind == "redis") {
    std::vector<std::string> argv = {"DEL"};
    for (const std::string& topic : EventTopics()) argv.push_back(topic);
    Check(admin.Command(argv).status(), "delete the event streams");
  } else if (bus.kind == "amqp") {
    // A connection of its own each time: one idle through a run misses its heartbeats.
    SubscribeOptions o;
    o.group = kEventsQueue;
    o.topics = EventTopics();
    auto queue = OpenSubscriber(bus.url, o);
    Check(queue.status(), "open the events queue");
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(600);
    while (Clock::now() < deadline) {
      auto polled = (*queue)->Poll(5'000, 500);
      Check(polled.status(), "drain the events queue");
      if (!polled->empty()) {
        drained += polled->size();
        Check((*queue)->AckAll(*polled), "ack the drained events");
        continue;
      }
      auto lag = (*queue)->Lag();
      Check(lag.status(), "the events queue's length");
      if (*lag == 0) return drained;
    }
    Die("the events queue is not empty after 600 s of draining");
  }
  return drained;
}

// Events off again in the database: no events_from (so range writes add no outbox rows), no
// outbox rows, no cursors.
void ResetEvents(PgConn& conn) {
  Check(conn.Exec("TRUNCATE event_outbox, event_cursors"), "truncate the outbox");
  Check(conn.Exec("DELETE FROM indexer_state WHERE key = '" + std::string(kEventsFromKey) + "'"),
        "disable events");
}

// ---- the Kafka block source -------------------------------------------------------------------

// What a TimedSubscriber measured; outlives it (the KafkaWorker owns and destroys the subscriber).
struct SubscriberStats {
  std::atomic<int64_t> join_micros{0};  // Poll until (and including) the first delivery
  std::atomic<int64_t> poll_micros{0};  // Poll after it
  std::atomic<int64_t> ack_micros{0};
  std::atomic<int64_t> close_micros{0};
  std::atomic<uint64_t> deliveries{0};
  std::atomic<int64_t> first_delivery_ns{0};  // steady clock; 0: none yet
};

// A Subscriber that forwards every call and times Poll, Ack and closing (the destructor).
class TimedSubscriber : public Subscriber {
 public:
  TimedSubscriber(std::unique_ptr<Subscriber> inner, std::shared_ptr<SubscriberStats> stats)
      : inner_(std::move(inner)), stats_(std::move(stats)) {}
  ~TimedSubscriber() override {
    Clock::time_point t0 = Clock::now();
    inner_.reset();
    stats_->close_micros += Micros(t0);
  }

  std::string name() const override { return inner_->name(); }
  Result<std::vector<Delivery>> Poll(size_t max, int64_t timeout_ms) override {
    Clock::time_point t0 = Clock::now();
    Result<std::vector<Delivery>> r = inner_->Poll(max, timeout_ms);
    const bool first = !joined_ && r.ok() && !r->empty();
    (joined_ ? stats_->poll_micros : stats_->join_micros) += Micros(t0);
    if (first) {
      joined_ = true;
      stats_->first_delivery_ns = Clock::now().time_since_epoch().count();
    }
    if (r.ok()) stats_->deliveries += r->size();
    return r;
  }
  Status Ack(const Delivery& delivery) override {
    Clock::time_point t0 = Clock::now();
    Status st = inner_->Ack(delivery);
    stats_->ack_micros += Micros(t0);
    return st;
  }
  Status DeadLetter(const Delivery& delivery, std::string_view error) override {
    return inner_->DeadLetter(delivery, error);
  }
  Status Pause(const std::string& topic, int32_t partition) override {
    return inner_->Pause(topic, partition);
  }
  Status Resume(const std::string& topic, int32_t partition) override {
    return inner_->Resume(topic, partition);
  }
  Result<int64_t> Lag() override { return inner_->Lag(); }
  std::vector<std::string> Assignment() const override { return inner_->Assignment(); }

 private:
  static int64_t Micros(Clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - since).count();
  }
  std::unique_ptr<Subscriber> inner_;
  std::shared_ptr<SubscriberStats> stats_;
  bool joined_ = false;
};

// The topic: every block of the range once, block n in partition (n / range) mod partitions, as
// `gapless produce --window range` sends it (node/events_command.cc RunProduce). Untimed.
void PublishBlocks(const Args& args, const FixtureNode& node, const std::string& bus_url) {
  auto publisher =
      OpenPublisher(bus_url + "?batch.num.messages=1&compression.codec=" + args.kafka_compression);
  Check(publisher.status(), "open the Kafka publisher");
  constexpr uint64_t kBatch = 10;
  for (uint64_t at = args.first; at < args.first + args.blocks; at += kBatch) {
    std::vector<OutgoingEvent> messages;
    for (uint64_t n = at; n < std::min(at + kBatch, args.first + args.blocks); ++n) {
      OutgoingEvent m;
      m.topic = kKafkaTopic;
      m.key = std::to_string(n);
      m.event_type = "block";
      m.event_id = m.key;
      m.partition = static_cast<int32_t>((n / args.range) % kKafkaPartitions);
      auto body = EncodeBlockMessage(node.Raw(n));
      Check(body.status(), "encode a block message");
      m.body = std::move(body).value();
      messages.push_back(std::move(m));
    }
    Check((*publisher)->Publish(messages), "publish blocks");
  }
}

struct KafkaWorkerLine {
  std::string id;
  uint64_t blocks = 0, windows = 0, skipped = 0, retries = 0, deliveries = 0;
  double run = 0, join = 0, poll = 0, decode = 0, write = 0, ack = 0, close = 0;  // seconds
};

struct KafkaResult {
  double seconds = 0;
  double first_delivery = 0;  // seconds from the start to the first delivery to any worker
  uint64_t transactions = 0, tasks = 0, skipped = 0, retries = 0, leases_lost = 0;
  uint64_t dead_lettered = 0, deliveries = 0;
  double worker_seconds = 0;  // summed wall time of the workers' Run calls
  double join = 0, poll = 0, decode = 0, write = 0, ack = 0, close = 0;  // seconds, summed
  double mock_cpu = -1;                                                  // the helper's CPU s
  std::vector<KafkaWorkerLine> workers;
};

KafkaResult RunKafka(const Args& args, int workers, bool verify, const std::string& db_url,
                     const KafkaMockCluster& cluster, RedisConn& admin, int64_t ns,
                     const std::string& group) {
  const Keys keys(ns);
  CheckNamespaceEmpty(admin, keys);
  auto pool = PgPool::Open(db_url, static_cast<size_t>(workers) + 2);
  Check(pool.status(), "pool");

  LeaderOptions lo;
  lo.from = args.first;
  lo.to = args.first + args.blocks - 1;
  lo.range_size = args.range;
  lo.tick_ms = args.tick_ms;
  lo.holder_id = "scale-bench";
  lo.blocks_from_stream = true;
  lo.heal_gaps_after_ms = 0;  // report only: there are no RPC workers to heal a gap
  LocalLease lease;
  Leader leader(lo, args.redis, keys, pool->get(), &lease);

  const std::string bus_url = cluster.url() + kKafkaConsumerProps;
  std::vector<std::shared_ptr<SubscriberStats>> stats;
  std::vector<std::unique_ptr<KafkaWorker>> fleet;
  for (int i = 0; i < workers; ++i) {
    KafkaWorkerOptions o;
    o.worker_id = "scale-bench:" + std::to_string(getpid()) + ":k" + std::to_string(i);
    o.bus_url = bus_url;
    o.topic = kKafkaTopic;
    o.group = group;
    o.from = args.first;
    o.to = args.first + args.blocks - 1;
    o.range_size = args.range;
    o.chain_id = kChainId;
    if (verify) o.verify = VerifyOptions{};
    o.token_metadata = false;
    auto s = std::make_shared<SubscriberStats>();
    stats.push_back(s);
    // What KafkaWorker::Run opens itself, wrapped to time it.
    o.open_subscriber = [bus_url, group, id = o.worker_id,
                         s]() -> Result<std::unique_ptr<Subscriber>> {
      SubscribeOptions subscribe;
      subscribe.group = group;
      subscribe.topics = {kKafkaTopic};
      subscribe.from_beginning = true;
      subscribe.consumer_name = id;
      Result<std::unique_ptr<Subscriber>> inner = OpenSubscriber(bus_url, subscribe);
      if (!inner.ok()) return inner.status();
      return std::unique_ptr<Subscriber>(
          std::make_unique<TimedSubscriber>(std::move(inner).value(), s));
    };
    fleet.push_back(std::make_unique<KafkaWorker>(o, args.redis, keys, pool->get()));
  }

  std::atomic<bool> stop{false};
  std::atomic<bool> timed_out{false};
  Status leader_status;
  std::vector<Status> worker_status(fleet.size());
  std::vector<double> worker_seconds(fleet.size());
  const double cpu_before = ProcessCpuSeconds(cluster.pid());
  Clock::time_point start = Clock::now();
  std::thread leader_thread([&] { leader_status = leader.Run(stop); });
  std::vector<std::thread> threads;
  for (size_t i = 0; i < fleet.size(); ++i) {
    threads.emplace_back([&, i] {
      Clock::time_point t0 = Clock::now();
      worker_status[i] = fleet[i]->Run(stop);
      worker_seconds[i] = Seconds(t0, Clock::now());
      if (!worker_status[i].ok()) stop.store(true);  // a run with a failed worker is void
    });
  }
  // A watchdog: a run that hangs (a stuck rebalance, a window never written) is reported, not
  // waited for forever.
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    Clock::time_point deadline = start + std::chrono::seconds(args.kafka_timeout_s);
    while (!finished.load() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!finished.load()) {
      timed_out.store(true);
      stop.store(true);
    }
  });
  leader_thread.join();
  for (std::thread& t : threads) t.join();
  Clock::time_point end = Clock::now();
  finished.store(true);
  watchdog.join();
  const double cpu_after = ProcessCpuSeconds(cluster.pid());
  if (timed_out.load()) {
    std::string state;
    for (const auto& w : fleet) {
      state += " " + w->id() + ": " + std::to_string(w->counters().blocks.load()) + " blocks, " +
               std::to_string(w->counters().tasks.load()) + " windows, done " +
               (w->done() ? "yes" : "no") + ";";
    }
    Die("kafka run not finished after " + std::to_string(args.kafka_timeout_s) + " s; frontier " +
        std::to_string(leader.frontier()) + ";" + state);
  }
  Check(leader_status, "leader");
  for (const Status& st : worker_status) Check(st, "kafka worker");
  if (!leader.done()) Die("the leader stopped before the range was done");

  KafkaResult r;
  r.seconds = Seconds(start, end);
  r.mock_cpu = cpu_before >= 0 && cpu_after >= 0 ? cpu_after - cpu_before : -1;
  int64_t first_ns = 0;
  auto secs = [](int64_t micros) { return static_cast<double>(micros) / 1e6; };
  for (size_t i = 0; i < fleet.size(); ++i) {
    const WorkerCounters& c = fleet[i]->counters();
    const SubscriberStats& s = *stats[i];
    KafkaWorkerLine line;
    line.id = fleet[i]->id();
    line.blocks = c.blocks;
    line.windows = c.tasks;
    line.skipped = fleet[i]->skipped();
    line.retries = c.retries;
    line.deliveries = s.deliveries;
    line.run = worker_seconds[i];
    line.join = secs(s.join_micros);
    line.poll = secs(s.poll_micros);
    line.decode = secs(static_cast<int64_t>(c.fetch_micros.load()));
    line.write = secs(static_cast<int64_t>(c.write_micros.load()));
    line.ack = secs(s.ack_micros);
    line.close = secs(s.close_micros);
    r.transactions += c.transactions;
    r.tasks += c.tasks;
    r.skipped += line.skipped;
    r.retries += c.retries;
    r.leases_lost += c.leases_lost;
    r.dead_lettered += c.dead_lettered;
    r.deliveries += line.deliveries;
    r.worker_seconds += line.run;
    r.join += line.join;
    r.poll += line.poll;
    r.decode += line.decode;
    r.write += line.write;
    r.ack += line.ack;
    r.close += line.close;
    if (s.first_delivery_ns != 0 && (first_ns == 0 || s.first_delivery_ns < first_ns)) {
      first_ns = s.first_delivery_ns;
    }
    r.workers.push_back(line);
  }
  if (first_ns != 0) {
    r.first_delivery =
        Seconds(start, Clock::time_point(Clock::duration(static_cast<Clock::rep>(first_ns))));
  }
  DeleteNamespace(admin, keys);
  return r;
}

// Reads the whole topic once with a throw-away consumer (untimed) and dies unless every block is
// there: the mock drops the oldest messages of a partition past 5 MB (see Args), and a run over
// a topic that lost blocks would wait forever for the gap to close.
void CheckTopic(const Args& args, const std::string& bus_url) {
  SubscribeOptions subscribe;
  subscribe.group = "scale-bench-check-" + std::to_string(getpid());
  subscribe.topics = {kKafkaTopic};
  subscribe.from_beginning = true;
  subscribe.transient = true;
  auto sub = OpenSubscriber(bus_url + kKafkaConsumerProps, subscribe);
  Check(sub.status(), "open the check consumer");
  std::set<uint64_t> seen;
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  while (seen.size() < args.blocks && Clock::now() < deadline) {
    auto polled = (*sub)->Poll(500, 200);
    if (!polled.ok()) continue;
    for (Delivery& d : *polled) {
      auto raw = ParseBlockMessage(std::move(d.body), "", "check");
      Check(raw.status(), "a published block");
      seen.insert(raw->number);
    }
  }
  if (seen.size() != args.blocks) {
    Die("the topic holds " + std::to_string(seen.size()) + " of " + std::to_string(args.blocks) +
        " blocks: the mock keeps only the last 5 MB of a partition; use fewer --blocks or "
        "--kafka-compression zstd");
  }
}

// The rows of the run, decoded before the clock, cut into the ranges the fleet writes.
std::vector<RangeWrite> DecodedRanges(const Args& args, const FixtureNode& node) {
  std::vector<RangeWrite> ranges;
  const uint64_t last = args.first + args.blocks - 1;
  for (uint64_t from = args.first; from <= last; from += args.range) {
    RangeWrite w;
    w.from_block = from;
    w.to_block = std::min(from + args.range - 1, last);
    for (uint64_t n = w.from_block; n <= w.to_block; ++n) {
      RawBlock raw = node.Raw(n);
      DecodeOptions options;
      options.expected_number = n;
      options.expected_chain_id = kChainId;
      auto data = DecodeBlock(raw.block_json, raw.receipts_json, options);
      Check(data.status(), "decode");
      w.blocks.push_back(std::move(data).value());
    }
    ranges.push_back(std::move(w));
  }
  return ranges;
}

struct SingleResult {
  double seconds = 0;
  uint64_t transactions = 0;
  uint64_t retries = 0;
};

SingleResult RunSingle(const Args& args, int workers, bool verify, const std::string& db_url,
                       const std::string& rpc_url) {
  auto pool = PgPool::Open(db_url, static_cast<size_t>(workers) + 1);
  Check(pool.status(), "pool");
  IndexerOptions o;
  o.from = args.first;
  o.to = args.first + args.blocks - 1;
  o.range_size = args.range;
  o.blocks_per_request = args.batch;
  o.fetch_workers = static_cast<uint32_t>(workers);
  o.chain_id = kChainId;
  if (verify) o.verify = VerifyOptions{};
  o.token_metadata = false;
  Indexer indexer(o, Clients(rpc_url, args.rpc_timeout_ms), pool->get());
  Clock::time_point start = Clock::now();
  auto planned = indexer.Plan();
  Check(planned.status(), "plan");
  if (*planned != args.blocks) Die("the truncated database already had blocks");
  Check(indexer.Run(), "indexer");
  SingleResult r;
  r.seconds = Seconds(start, Clock::now());
  r.transactions = indexer.counters().transactions;
  r.retries = indexer.counters().retries;
  return r;
}

// The run of median duration (for an even count the faster of the two middle ones: a real run,
// not an average of two).
template <typename T>
const T& Median(std::vector<T>& runs) {
  std::sort(runs.begin(), runs.end(), [](const T& a, const T& b) { return a.seconds < b.seconds; });
  return runs[(runs.size() - 1) / 2];
}

std::string Shell(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return "?";
  char buf[256] = {0};
  std::string out = std::fgets(buf, sizeof buf, p) != nullptr ? buf : "?";
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string LoadAverage() {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) != 3) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", load[0], load[1], load[2]);
  return buf;
}

// --serve: the fixture node alone until SIGTERM or SIGINT.
int Serve(const Args& args) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // Blocked before the server's threads start, so that they inherit the mask and sigwait gets it.
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  FixtureBlock fixture;
  FixtureNode node(fixture, args.first, args.blocks);
  std::printf("serving %s blocks %llu..%llu (%zu txs each, %.1f MB of prepared JSON)\n",
              node.url().c_str(), static_cast<unsigned long long>(args.first),
              static_cast<unsigned long long>(args.first + args.blocks - 1), fixture.transactions(),
              static_cast<double>(node.bytes()) / 1e6);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("%lld requests answered\n", static_cast<long long>(node.requests()));
  return 0;
}

int Main(int argc, char** argv) {
  bench::ProgramName() = "scale_bench";
  Args args = ParseArgs(argc, argv);
  // Log lines go to stderr, the figures to stdout. The roles' info lines (terms, fence floors)
  // are noise, unless asked for.
  spdlog::set_default_logger(spdlog::stderr_color_mt("scale_bench"));
  spdlog::set_level(args.verbose ? spdlog::level::info : spdlog::level::warn);
  if (args.serve) return Serve(args);

  // The database: created afresh, migrated, dropped at the end.
  const std::string db_name = "gapless_scale_bench";
  auto admin_pg = PgConn::Connect(args.pg);
  Check(admin_pg.status(), ("connect " + RedactUrl(args.pg)).c_str());
  Check((*admin_pg)->Exec("DROP DATABASE IF EXISTS " + db_name + " WITH (FORCE)"), "drop database");
  Check((*admin_pg)->Exec("CREATE DATABASE " + db_name), "create database");
  auto db_url = PgUrlWithDatabase(args.pg, db_name);
  Check(db_url.status(), "url");
  std::string pg_version;
  {
    auto conn = PgConn::Connect(*db_url);
    Check(conn.status(), "connect bench database");
    Check(Migrate(**conn), "migrate");
    Check(EnsureChainId(**conn, kChainId), "chain id");
    auto v = (*conn)->Query("SHOW server_version");
    Check(v.status(), "version");
    pg_version = v->Get(0, 0);
  }
  // The postmaster (the parent of this connection's backend), when the server runs here: the
  // events runs' PostgreSQL CPU.
  pid_t postmaster = -1;
  if (!args.events.empty()) {
    auto backend = (*admin_pg)->Query("SELECT pg_backend_pid()");
    Check(backend.status(), "backend pid");
    std::ifstream in("/proc/" + std::string(backend->Get(0, 0)) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');
    if (paren != std::string::npos && text.find("(postgres)") != std::string::npos) {
      std::stringstream fields(text.substr(paren + 2));
      std::string state;
      long ppid = 0;
      if (fields >> state >> ppid) postmaster = static_cast<pid_t>(ppid);
    }
  }
  auto admin_redis = RedisConn::Connect(args.redis);
  Check(admin_redis.status(), ("connect " + args.redis).c_str());
  std::string redis_version = "?";
  pid_t redis_pid = -1;  // for the events runs' broker CPU (the server may be on another machine)
  if (auto info = (*admin_redis)->Command({"INFO", "server"}); info.ok()) {
    size_t at = info->str.find("redis_version:");
    if (at != std::string::npos) {
      redis_version = info->str.substr(at + 14, info->str.find('\r', at) - at - 14);
    }
    at = info->str.find("process_id:");
    if (at != std::string::npos) {
      const pid_t pid = static_cast<pid_t>(std::stol(info->str.substr(at + 11)));
      if (ProcessCpuSeconds(pid) >= 0) redis_pid = pid;
    }
  }

  // The RPC source, rendered before any clock starts.
  Clock::time_point render_start = Clock::now();
  FixtureBlock fixture;
  FixtureNode node(fixture, args.first, args.blocks);
  const double render_seconds = Seconds(render_start, Clock::now());
  const uint64_t txs = fixture.transactions() * args.blocks;
  const uint64_t ranges = (args.blocks + args.range - 1) / args.range;

  std::printf(
      "scale_bench: blocks %llu..%llu (mainnet 17000000 re-stamped: %zu txs each, %llu txs), "
      "%llu ranges of %llu, %u blocks per RPC batch, %.1f MB of prepared JSON (rendered and "
      "checked in %.1f s; VerifyBlock %.2f ms a block on one thread); %d repetition(s)\n",
      static_cast<unsigned long long>(args.first),
      static_cast<unsigned long long>(args.first + args.blocks - 1), fixture.transactions(),
      static_cast<unsigned long long>(txs), static_cast<unsigned long long>(ranges),
      static_cast<unsigned long long>(args.range), args.batch,
      static_cast<double>(node.bytes()) / 1e6, render_seconds, node.verify_ms_per_block(),
      args.repeat);
  std::printf(
      "machine: %u cores (%s), load average before: %s; PostgreSQL %s, Redis %s; leader tick %lld "
      "ms, worker idle poll %lld ms, worker prefetch %s\n",
      std::thread::hardware_concurrency(),
      Shell("sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1").c_str(),
      LoadAverage().c_str(), pg_version.c_str(), redis_version.c_str(),
      static_cast<long long>(args.tick_ms), static_cast<long long>(args.idle_poll_ms),
      args.prefetch ? "on" : "off");
  std::fflush(stdout);

  // The Kafka topic and the COPY rows, prepared before any clock starts.
  std::unique_ptr<KafkaMockCluster> cluster;
  if (args.sources.count("kafka") != 0) {
    Clock::time_point t0 = Clock::now();
    auto started = KafkaMockCluster::Start(kKafkaBrokers);
    Check(started.status(), "start the Kafka mock cluster");
    cluster = std::move(started).value();
    Check(cluster->CreateTopic(kKafkaTopic, kKafkaPartitions, kKafkaBrokers), "create topic");
    PublishBlocks(args, node, cluster->url());
    CheckTopic(args, cluster->url());
    const double publish_seconds = Seconds(t0, Clock::now());
    // What each Kafka worker pays per message before decoding: the envelope parse (and the copy
    // of the receipts) of ParseBlockMessage, timed here on one thread.
    Clock::time_point p0 = Clock::now();
    const uint64_t sample = std::min<uint64_t>(args.blocks, 100);
    for (uint64_t n = args.first; n < args.first + sample; ++n) {
      auto body = EncodeBlockMessage(node.Raw(n));
      Check(body.status(), "encode");
      Check(ParseBlockMessage(std::move(body).value(), "", "bench").status(), "parse");
    }
    const double encode_parse_ms = 1000 * Seconds(p0, Clock::now()) / static_cast<double>(sample);
    std::printf(
        "kafka: mock cluster of %d brokers (pid %d), topic %s of %d partitions; %llu blocks "
        "published (compression.codec=%s, one block per batch) and read back in %.1f s, block n "
        "in partition (n / %llu) mod %d; consumers %s; encode + parse of one message: %.2f ms\n",
        kKafkaBrokers, static_cast<int>(cluster->pid()), kKafkaTopic, kKafkaPartitions,
        static_cast<unsigned long long>(args.blocks), args.kafka_compression.c_str(),
        publish_seconds, static_cast<unsigned long long>(args.range), kKafkaPartitions,
        kKafkaConsumerProps, encode_parse_ms);
  }
  std::vector<RangeWrite> copy_ranges;
  if (args.sources.count("copy") != 0) copy_ranges = DecodedRanges(args, node);
  // The buses of the events runs.
  std::map<std::string, std::unique_ptr<EventsBus>> buses;
  for (const std::string& kind : args.events) {
    std::unique_ptr<EventsBus> bus = StartEventsBus(kind, args, redis_pid);
    if (bus == nullptr) continue;
    DrainEventsBus(*bus, **admin_redis);
    std::printf("events %s: %s (broker pid %d)\n", kind.c_str(), BusName(bus->url).c_str(),
                static_cast<int>(bus->pid));
    buses[kind] = std::move(bus);
  }
  if (!args.events.empty()) {
    std::printf(
        "events: %zu a block (%llu in all), relay as `gapless run --events` (batches of 200 "
        "blocks / 5000 events, tick 200 ms, woken by the frontier's NOTIFY); sampler every %lld "
        "ms at most\n",
        fixture.events_per_block(),
        static_cast<unsigned long long>(fixture.events_per_block() * args.blocks),
        static_cast<long long>(args.sample_ms));
  }
  std::fflush(stdout);

  auto conn = PgConn::Connect(*db_url);
  Check(conn.status(), "connect bench database");
  std::map<std::string, std::string> reference;
  // By worker count, for the first --verify value (the tables comparing sources); all runs by
  // (worker count, verify) for the verify table.
  std::map<int, std::vector<FleetResult>> fleet_runs;
  std::map<int, std::vector<SingleResult>> single_runs;
  std::map<int, std::vector<KafkaResult>> kafka_runs;
  std::map<std::pair<int, bool>, std::vector<FleetResult>> fleet_by_verify;
  std::map<std::pair<int, bool>, std::vector<SingleResult>> single_by_verify;
  std::map<std::pair<int, bool>, std::vector<KafkaResult>> kafka_by_verify;
  const bool verify_shown = args.verify.size() > 1 || args.verify.front();
  std::map<int, std::vector<double>> copy_runs;  // seconds, by connections (= worker count)
  // A namespace per fleet run: far above any real chain id, distinct per process and run.
  int64_t ns = 8'000'000'000'000LL + static_cast<int64_t>(getpid()) * 1'000;
  // The runs of one worker count (source, verify), rotated per repetition.
  std::vector<std::pair<std::string, bool>> order;
  for (const char* s : {"rpc", "kafka", "single"}) {
    if (args.sources.count(s) == 0) continue;
    for (bool v : args.verify) order.emplace_back(s, v);
  }
  // The events runs: off, then on per bus (with the first --verify value).
  std::map<std::pair<int, std::string>, std::vector<FleetResult>> events_runs;  // (workers, bus)
  if (!args.events.empty()) {
    order.emplace_back("events:off", args.verify.front());
    for (const auto& [kind, bus] : buses) order.emplace_back("events:" + kind, args.verify.front());
  }
  const uint64_t all_events = fixture.events_per_block() * args.blocks;
  auto run_copy = [&](int rep) {
    for (int w : args.workers) {
      Reset(**conn);
      double s = bench::RawCopyParallel(*db_url, copy_ranges, w);
      CheckStored(**conn, args, txs, &reference);
      std::printf(
          "rep %d workers %-2d copy    %7.2f s %8.0f tx/s  (%d connection%s, %llu ranges)  "
          "[load %s]\n",
          rep + 1, w, s, static_cast<double>(txs) / s, w, w == 1 ? "" : "s",
          static_cast<unsigned long long>(ranges), LoadAverage().c_str());
      std::fflush(stdout);
      copy_runs[w].push_back(s);
    }
  };
  for (int rep = 0; rep < args.repeat; ++rep) {
    if (!copy_ranges.empty() && rep % 2 == 0) run_copy(rep);
    for (int w : args.workers) {
      // Rotate which run goes first, so none always gets the warmer (or the busier) machine.
      for (size_t k = 0; k < order.size(); ++k) {
        const auto& [mode, verify] = order[(k + static_cast<size_t>(rep)) % order.size()];
        const bool first_verify = verify == args.verify.front();
        const char* vlabel = !verify_shown ? "" : verify ? " verify on " : " verify off";
        Reset(**conn);
        if (!args.events.empty()) ResetEvents(**conn);
        if (mode.starts_with("events:")) {
          const std::string kind = mode.substr(7);
          EventsBus* bus = kind == "off" ? nullptr : buses.at(kind).get();
          EventsRun run;
          run.postgres = postmaster;
          if (bus != nullptr) {
            run.bus_url = bus->url;
            run.broker = bus->pid;
          } else {
            run.broker = redis_pid;  // the coordination's own Redis CPU, for comparison
          }
          FleetResult r = RunFleet(args, w, verify, *db_url, node.url(), **admin_redis, ++ns, &run);
          if (r.transactions != txs || r.tasks != ranges) {
            Die("events fleet: " + std::to_string(r.transactions) + " transactions in " +
                std::to_string(r.tasks) + " tasks");
          }
          CheckStored(**conn, args, txs, &reference);
          const EventsFigures& e = r.events;
          std::string relay;
          if (bus != nullptr) {
            // Every block's events published, the outbox pruned empty behind the cursor.
            auto left = (*conn)->Query(
                "SELECT (SELECT count(*) FROM event_outbox), (SELECT min(next_block) FROM "
                "event_cursors)");
            Check(left.status(), "outbox after the run");
            if (left->Get(0, 0) != "0" ||
                left->Get(0, 1) != std::to_string(args.first + args.blocks)) {
              Die("after the relay: " + std::string(left->Get(0, 0)) +
                  " outbox rows left, cursor " + std::string(left->Get(0, 1)));
            }
            const uint64_t drained = DrainEventsBus(*bus, **admin_redis);
            if (e.events != all_events || (bus->kind == "amqp" && drained != e.events)) {
              std::printf("    NOTE: %llu events published (%llu expected), %llu drained\n",
                          static_cast<unsigned long long>(e.events),
                          static_cast<unsigned long long>(all_events),
                          static_cast<unsigned long long>(drained));
            }
            char buf[400];
            std::snprintf(
                buf, sizeof buf,
                "  catch-up %.2f s  commit->publish p50 %.0f p99 %.0f ms  frontier->publish p50 "
                "%.0f p99 %.0f ms  backlog max %llu blocks / %.1fk events, at indexing end %llu "
                "/ %.1fk",
                e.catch_up, Percentile(e.commit_to_publish, 50),
                Percentile(e.commit_to_publish, 99), Percentile(e.frontier_to_publish, 50),
                Percentile(e.frontier_to_publish, 99),
                static_cast<unsigned long long>(e.max_backlog_blocks),
                static_cast<double>(e.max_backlog_events) / 1000,
                static_cast<unsigned long long>(e.end_backlog_blocks),
                static_cast<double>(e.end_backlog_events) / 1000);
            relay = buf;
          }
          std::printf(
              "rep %d workers %d events %-5s %7.2f s %8.0f tx/s  coord %4.1f%% idle %4.1f%% fetch "
              "%4.1f%% write %4.1f%%%s  cpu s (to caught up, %.2f s): bench %.2f postgres %.2f "
              "broker %.2f  [load %s]\n",
              rep + 1, w, kind.c_str(), r.seconds, static_cast<double>(txs) / r.seconds,
              100 * r.coord / r.worker_seconds, 100 * r.idle / r.worker_seconds,
              100 * r.fetch / r.worker_seconds, 100 * r.write / r.worker_seconds, relay.c_str(),
              e.wall, e.bench_cpu, e.pg_cpu, e.broker_cpu, LoadAverage().c_str());
          if (bus != nullptr) {
            std::printf("    backlog blocks/events every 0.5 s (| = indexing done): %s\n",
                        BacklogSeries(e, r.seconds).c_str());
          }
          r.events.rep = rep;
          events_runs[{w, kind}].push_back(std::move(r));
        } else if (mode == "rpc") {
          FleetResult r = RunFleet(args, w, verify, *db_url, node.url(), **admin_redis, ++ns);
          if (r.transactions != txs || r.tasks != ranges) {
            Die("fleet: " + std::to_string(r.transactions) + " transactions in " +
                std::to_string(r.tasks) + " tasks (want " + std::to_string(txs) + " in " +
                std::to_string(ranges) + ")");
          }
          CheckStored(**conn, args, txs, &reference);
          std::printf(
              "rep %d workers %d fleet%s   %7.2f s %8.0f tx/s  coord %4.1f%% idle %4.1f%% fetch "
              "%4.1f%% write %4.1f%%  retries %llu failed %llu leases lost %llu  [load %s]\n",
              rep + 1, w, vlabel, r.seconds, static_cast<double>(txs) / r.seconds,
              100 * r.coord / r.worker_seconds, 100 * r.idle / r.worker_seconds,
              100 * r.fetch / r.worker_seconds, 100 * r.write / r.worker_seconds,
              static_cast<unsigned long long>(r.retries), static_cast<unsigned long long>(r.failed),
              static_cast<unsigned long long>(r.leases_lost), LoadAverage().c_str());
          if (first_verify) fleet_runs[w].push_back(r);
          fleet_by_verify[{w, verify}].push_back(r);
        } else if (mode == "kafka") {
          // A group of the run's own (its committed offsets would hide the topic from a later
          // run): per process, repetition, worker count and verify value.
          const std::string group = "scale-bench-" + std::to_string(getpid()) + "-" +
                                    std::to_string(rep) + "-" + std::to_string(w) +
                                    (verify ? "-v" : "");
          KafkaResult r = RunKafka(args, w, verify, *db_url, *cluster, **admin_redis, ++ns, group);
          CheckStored(**conn, args, txs, &reference);
          const double total = r.worker_seconds;
          const double other = total - r.join - r.poll - r.decode - r.write - r.ack - r.close;
          std::printf(
              "rep %d workers %d kafka%s   %7.2f s %8.0f tx/s  (first delivery at %.2f s; after it "
              "%8.0f tx/s)  join %4.1f%% poll %4.1f%% decode %4.1f%% write %4.1f%% ack %4.1f%% "
              "close %4.1f%% other %4.1f%%  windows %llu skipped %llu retries %llu leases lost "
              "%llu dead-lettered %llu  mock cpu %.2f s  [load %s]\n",
              rep + 1, w, vlabel, r.seconds, static_cast<double>(txs) / r.seconds, r.first_delivery,
              static_cast<double>(txs) / (r.seconds - r.first_delivery), 100 * r.join / total,
              100 * r.poll / total, 100 * r.decode / total, 100 * r.write / total,
              100 * r.ack / total, 100 * r.close / total, 100 * other / total,
              static_cast<unsigned long long>(r.tasks), static_cast<unsigned long long>(r.skipped),
              static_cast<unsigned long long>(r.retries),
              static_cast<unsigned long long>(r.leases_lost),
              static_cast<unsigned long long>(r.dead_lettered), r.mock_cpu, LoadAverage().c_str());
          for (const KafkaWorkerLine& l : r.workers) {
            std::printf(
                "    %-28s run %6.2f s  blocks %4llu windows %3llu skipped %2llu retries %llu "
                "deliveries %4llu | join %5.2f poll %5.2f decode %5.2f write %5.2f ack %5.2f "
                "close %5.2f s\n",
                l.id.c_str(), l.run, static_cast<unsigned long long>(l.blocks),
                static_cast<unsigned long long>(l.windows),
                static_cast<unsigned long long>(l.skipped),
                static_cast<unsigned long long>(l.retries),
                static_cast<unsigned long long>(l.deliveries), l.join, l.poll, l.decode, l.write,
                l.ack, l.close);
          }
          // Stored right (checked above) but written more than once: the issue says never.
          if (r.transactions != txs) {
            std::printf("    NOTE: the workers counted %llu transactions written, %llu stored\n",
                        static_cast<unsigned long long>(r.transactions),
                        static_cast<unsigned long long>(txs));
          }
          if (first_verify) kafka_runs[w].push_back(r);
          kafka_by_verify[{w, verify}].push_back(r);
        } else {
          SingleResult r = RunSingle(args, w, verify, *db_url, node.url());
          if (r.transactions != txs) Die("indexer: " + std::to_string(r.transactions) + " txs");
          CheckStored(**conn, args, txs, &reference);
          std::printf("rep %d workers %d single%s  %7.2f s %8.0f tx/s  retries %llu  [load %s]\n",
                      rep + 1, w, vlabel, r.seconds, static_cast<double>(txs) / r.seconds,
                      static_cast<unsigned long long>(r.retries), LoadAverage().c_str());
          if (first_verify) single_runs[w].push_back(r);
          single_by_verify[{w, verify}].push_back(r);
        }
        std::fflush(stdout);
      }
    }
    if (!copy_ranges.empty() && rep % 2 == 1) run_copy(rep);
  }

  std::printf("\nload average after: %s; RPC requests served: %lld\n", LoadAverage().c_str(),
              static_cast<long long>(node.requests()));
  auto tps = [&](double seconds) { return static_cast<double>(txs) / seconds; };
  if (args.sources.count("rpc") != 0 && args.sources.count("single") != 0) {
    std::printf(
        "medians of %d; shares: of the fleet workers' summed Run time, in the median fleet run\n",
        args.repeat);
    std::printf("%-7s %10s %11s %6s %7s %6s %7s %7s %7s %8s   %s\n", "workers", "fleet tx/s",
                "single tx/s", "ratio", "coord%", "idle%", "fetch%", "write%", "other%", "coord ms",
                "all runs (fleet | single tx/s)");
    for (int w : args.workers) {
      std::string all;
      for (const FleetResult& r : fleet_runs[w])
        all += std::to_string(std::lround(tps(r.seconds))) + " ";
      all += "| ";
      for (const SingleResult& r : single_runs[w]) {
        all += std::to_string(std::lround(tps(r.seconds))) + " ";
      }
      const FleetResult& f = Median(fleet_runs[w]);
      const SingleResult& s = Median(single_runs[w]);
      double fleet_tps = tps(f.seconds);
      double single_tps = tps(s.seconds);
      double total = f.worker_seconds;
      double other = total - f.coord - f.idle - f.fetch - f.write;
      std::printf("%-7d %10.0f %11.0f %5.2fx %6.1f%% %5.1f%% %6.1f%% %6.1f%% %6.1f%% %8.2f   %s\n",
                  w, fleet_tps, single_tps, fleet_tps / single_tps, 100 * f.coord / total,
                  100 * f.idle / total, 100 * f.fetch / total, 100 * f.write / total,
                  100 * other / total, 1000 * f.coord / static_cast<double>(f.tasks), all.c_str());
    }
    std::printf(
        "coord ms: the loop's Redis time per task (fence-floor check, claim, renew, complete; "
        "the claims that found nothing included)\n");
  }
  // Raw COPY over N connections at once, by N: the limit every figure is a ratio to.
  std::map<int, double> copy_tps;
  if (!copy_runs.empty()) {
    std::printf(
        "\nraw COPY over N connections at once (one transaction per range of %llu), medians of "
        "%d; the fleet and the single process of N workers as a ratio to it\n",
        static_cast<unsigned long long>(args.range), args.repeat);
    std::printf("%-7s %10s %10s %7s %11s %8s   %s\n", "N", "copy tx/s", "fleet tx/s", "/copy",
                "single tx/s", "/copy", "all copy runs (tx/s)");
    for (int w : args.workers) {
      std::vector<double> sorted = copy_runs[w];
      std::sort(sorted.begin(), sorted.end());
      copy_tps[w] = tps(sorted[(sorted.size() - 1) / 2]);
      std::string all;
      for (double s : copy_runs[w]) all += std::to_string(std::lround(tps(s))) + " ";
      const double fleet = fleet_runs[w].empty() ? 0 : tps(Median(fleet_runs[w]).seconds);
      const double single = single_runs[w].empty() ? 0 : tps(Median(single_runs[w]).seconds);
      auto ratio = [&](double a) {
        return a > 0 ? std::to_string(a / copy_tps[w]).substr(0, 4) + "x" : std::string("-");
      };
      std::printf("%-7d %10.0f %10.0f %7s %11.0f %8s   %s\n", w, copy_tps[w], fleet,
                  ratio(fleet).c_str(), single, ratio(single).c_str(), all.c_str());
    }
  }
  if (!kafka_runs.empty()) {
    std::printf(
        "\nKafka source, medians of %d: tx/s over the whole clock and after the first delivery; "
        "ratios to the RPC fleet of the same worker count (whole clock) and to raw COPY; shares "
        "of the Kafka workers' summed Run time in the median Kafka run; * = a run with a late "
        "group member (a rebalance: windows re-read and skipped)\n",
        args.repeat);
    std::printf("%-7s %10s %11s %10s %6s %6s %6s %6s %6s %7s %6s %6s %6s %6s %8s   %s\n", "workers",
                "kafka tx/s", "after join", "rpc tx/s", "/rpc", "/copy", "join%", "poll%",
                "decode%", "write%", "ack%", "close%", "other%", "skipped", "mock cpu",
                "all runs (kafka | rpc fleet tx/s)");
    for (int w : args.workers) {
      std::string all;
      for (const KafkaResult& r : kafka_runs[w]) {
        all += std::to_string(std::lround(tps(r.seconds))) + (r.skipped > 0 ? "* " : " ");
      }
      all += "| ";
      for (const FleetResult& r : fleet_runs[w])
        all += std::to_string(std::lround(tps(r.seconds))) + " ";
      const KafkaResult& k = Median(kafka_runs[w]);
      const double kafka_tps = tps(k.seconds);
      const double rpc_tps = fleet_runs[w].empty() ? 0 : tps(Median(fleet_runs[w]).seconds);
      const double total = k.worker_seconds;
      const double other = total - k.join - k.poll - k.decode - k.write - k.ack - k.close;
      auto ratio = [](double a, double b) {
        return b > 0 ? std::to_string(a / b).substr(0, 4) + "x" : std::string("-");
      };
      std::printf(
          "%-7d %10.0f %11.0f %10.0f %6s %6s %5.1f%% %5.1f%% %6.1f%% %6.1f%% %5.1f%% %5.1f%% "
          "%5.1f%% %7llu %7.2fs   %s\n",
          w, kafka_tps, tps(k.seconds - k.first_delivery), rpc_tps,
          ratio(kafka_tps, rpc_tps).c_str(), ratio(kafka_tps, copy_tps[w]).c_str(),
          100 * k.join / total, 100 * k.poll / total, 100 * k.decode / total, 100 * k.write / total,
          100 * k.ack / total, 100 * k.close / total, 100 * other / total,
          static_cast<unsigned long long>(k.skipped), k.mock_cpu, all.c_str());
    }
  }

  if (args.verify.size() > 1) {
    // Issue 10's benchmark: the same runs with --verify off and on, in the same invocation.
    std::printf(
        "\n--verify (every block proven against its header before it is written), medians of %d: "
        "tx/s off and on, on/off, and the throughput it costs (1 - on/off)\n",
        args.repeat);
    std::printf("%-7s %-7s %10s %10s %7s %7s   %s\n", "source", "workers", "off tx/s", "on tx/s",
                "on/off", "cost", "all runs (off | on tx/s)");
    auto row = [&](const char* source, int w, auto& by_verify) {
      auto& off = by_verify[{w, false}];
      auto& on = by_verify[{w, true}];
      if (off.empty() || on.empty()) return;
      std::string all;
      for (const auto& r : off) all += std::to_string(std::lround(tps(r.seconds))) + " ";
      all += "| ";
      for (const auto& r : on) all += std::to_string(std::lround(tps(r.seconds))) + " ";
      const double off_tps = tps(Median(off).seconds);
      const double on_tps = tps(Median(on).seconds);
      std::printf("%-7s %-7d %10.0f %10.0f %6.3fx %6.1f%%   %s\n", source, w, off_tps, on_tps,
                  on_tps / off_tps, 100 * (1 - on_tps / off_tps), all.c_str());
    };
    for (int w : args.workers) {
      row("fleet", w, fleet_by_verify);
      row("single", w, single_by_verify);
      row("kafka", w, kafka_by_verify);
    }
    for (int w : args.workers) {
      auto& off = kafka_by_verify[{w, false}];
      auto& on = kafka_by_verify[{w, true}];
      if (off.empty() || on.empty()) continue;
      const KafkaResult& k_off = Median(off);
      const KafkaResult& k_on = Median(on);
      const double off_tps = tps(k_off.seconds - k_off.first_delivery);
      const double on_tps = tps(k_on.seconds - k_on.first_delivery);
      std::printf(
          "kafka workers %d after the first delivery (the group join, ~3 s, excluded): %.0f -> "
          "%.0f tx/s, on/off %.3fx, cost %.1f%%\n",
          w, off_tps, on_tps, on_tps / off_tps, 100 * (1 - on_tps / off_tps));
    }
    for (int w : args.workers) {
      auto& off = fleet_by_verify[{w, false}];
      auto& on = fleet_by_verify[{w, true}];
      if (off.empty() || on.empty()) continue;
      const FleetResult& f_off = Median(off);
      const FleetResult& f_on = Median(on);
      std::printf(
          "fleet workers %d, median runs: fetch (fetch + decode + verify) %.2f s -> %.2f s of "
          "the workers' summed time, %.1f%% -> %.1f%%\n",
          w, f_off.fetch, f_on.fetch, 100 * f_off.fetch / f_off.worker_seconds,
          100 * f_on.fetch / f_on.worker_seconds);
    }
  }

  if (!events_runs.empty()) {
    // Issue 19: indexing with events on vs off, in the same invocation.
    std::printf(
        "\nindexing with events on (--events), medians of %d: the RPC fleet wired as `gapless "
        "run`, events off vs the relay on each bus; on/off = indexing tx/s ratio of the medians; "
        "paired = the median of each repetition's on/off ratio; catch-up = "
        "relay done after indexing (median run); latencies in ms over every block of every run; "
        "backlog (blocks / events) max during indexing and at its end, in the median run; broker "
        "cpu s in the median run (off: the coordination Redis)\n",
        args.repeat);
    std::printf("%-7s %-6s %9s %9s %7s %7s %9s %14s %14s %16s %14s %7s   %s\n", "workers", "bus",
                "off tx/s", "on tx/s", "on/off", "paired", "catch-up", "commit->pub",
                "frontier->pub", "max backlog", "end backlog", "broker",
                "all runs (on | off tx/s)");
    std::printf("%-7s %-6s %9s %9s %7s %7s %9s %14s %14s %16s %14s %7s\n", "", "", "", "", "", "",
                "s", "p50 / p99", "p50 / p99", "blocks / events", "blocks / ev", "cpu s");
    auto all = [&](const std::vector<FleetResult>& runs) {
      std::string out;
      for (const FleetResult& r : runs) out += std::to_string(std::lround(tps(r.seconds))) + " ";
      return out;
    };
    for (int w : args.workers) {
      auto off_it = events_runs.find({w, "off"});
      if (off_it == events_runs.end()) continue;
      const FleetResult& off = Median(off_it->second);
      const double off_tps = tps(off.seconds);
      std::printf("%-7d %-6s %9.0f %9s %7s %7s %9s %14s %14s %16s %14s %7.2f   %s\n", w, "off",
                  off_tps, "", "", "", "", "", "", "", "", off.events.broker_cpu,
                  all(off_it->second).c_str());
      for (const auto& [kind, bus] : buses) {
        auto on_it = events_runs.find({w, kind});
        if (on_it == events_runs.end()) continue;
        std::vector<double> c2p, f2p;
        for (const FleetResult& r : on_it->second) {
          c2p.insert(c2p.end(), r.events.commit_to_publish.begin(),
                     r.events.commit_to_publish.end());
          f2p.insert(f2p.end(), r.events.frontier_to_publish.begin(),
                     r.events.frontier_to_publish.end());
        }
        const FleetResult& on = Median(on_it->second);
        const EventsFigures& e = on.events;
        char lat1[40], lat2[40], max[40], end[40];
        std::snprintf(lat1, sizeof lat1, "%.0f / %.0f", Percentile(c2p, 50), Percentile(c2p, 99));
        std::snprintf(lat2, sizeof lat2, "%.0f / %.0f", Percentile(f2p, 50), Percentile(f2p, 99));
        std::snprintf(max, sizeof max, "%llu / %.1fk",
                      static_cast<unsigned long long>(e.max_backlog_blocks),
                      static_cast<double>(e.max_backlog_events) / 1000);
        std::snprintf(end, sizeof end, "%llu / %.1fk",
                      static_cast<unsigned long long>(e.end_backlog_blocks),
                      static_cast<double>(e.end_backlog_events) / 1000);
        const double on_tps = tps(on.seconds);
        // Each on run against the off run of its own repetition (the nearest in time: the
        // machine's load drifts between repetitions), the median of those ratios.
        std::vector<double> paired;
        for (const FleetResult& r : on_it->second) {
          for (const FleetResult& o : off_it->second) {
            if (o.events.rep == r.events.rep) paired.push_back(o.seconds / r.seconds);
          }
        }
        std::printf(
            "%-7d %-6s %9.0f %9.0f %6.3fx %6.3fx %9.2f %14s %14s %16s %14s %7.2f   %s| %s\n", w,
            kind.c_str(), off_tps, on_tps, on_tps / off_tps, Percentile(paired, 50), e.catch_up,
            lat1, lat2, max, end, e.broker_cpu, all(on_it->second).c_str(),
            all(off_it->second).c_str());
      }
    }
  }

  if (!events_runs.empty()) {
    std::printf(
        "\nwhere the CPU goes, medians of %d (each column's own median over the runs): CPU seconds "
        "from the start until the relay caught up (off: the indexing clock) of this process "
        "(workers, leader, relay, the fixture node), the PostgreSQL server and the broker (off: "
        "the coordination Redis); per 1000 events: what an on run spends beyond the off runs' "
        "median; busy = all three over (2 cores x the wall time)\n",
        args.repeat);
    std::printf("%-7s %-6s %8s %8s %9s %8s %8s %13s %13s %13s %6s\n", "workers", "bus", "wall s",
                "bench s", "postgres s", "broker s", "total s", "+bench/kev ms", "+pg/kev ms",
                "+broker/kev", "busy");
    auto median_of = [](const std::vector<FleetResult>& runs, double EventsFigures::*field) {
      std::vector<double> v;
      for (const FleetResult& r : runs) v.push_back(r.events.*field);
      return Percentile(v, 50);
    };
    const double cores = static_cast<double>(std::thread::hardware_concurrency());
    for (int w : args.workers) {
      auto off_it = events_runs.find({w, "off"});
      if (off_it == events_runs.end()) continue;
      const double off_bench = median_of(off_it->second, &EventsFigures::bench_cpu);
      const double off_pg = median_of(off_it->second, &EventsFigures::pg_cpu);
      const double off_broker = median_of(off_it->second, &EventsFigures::broker_cpu);
      std::vector<std::string> kinds = {"off"};
      for (const auto& [kind, bus] : buses) kinds.push_back(kind);
      for (const std::string& kind : kinds) {
        auto it = events_runs.find({w, kind});
        if (it == events_runs.end()) continue;
        const double wall = median_of(it->second, &EventsFigures::wall);
        const double bench = median_of(it->second, &EventsFigures::bench_cpu);
        const double pg = median_of(it->second, &EventsFigures::pg_cpu);
        const double broker = median_of(it->second, &EventsFigures::broker_cpu);
        const double kev = static_cast<double>(all_events) / 1000;
        auto extra = [&](double on, double off) {
          char buf[32];
          if (kind == "off") return std::string("");
          std::snprintf(buf, sizeof buf, "%.2f", 1000 * (on - off) / kev);
          return std::string(buf);
        };
        std::printf("%-7d %-6s %8.2f %8.2f %9.2f %8.2f %8.2f %13s %13s %13s %5.0f%%\n", w,
                    kind.c_str(), wall, bench, pg, broker, bench + pg + broker,
                    extra(bench, off_bench).c_str(), extra(pg, off_pg).c_str(),
                    kind == "redis" ? extra(broker, off_broker).c_str() : extra(broker, 0).c_str(),
                    100 * (bench + pg + broker) / (cores * wall));
      }
    }
  }

  conn = Result<std::unique_ptr<PgConn>>(Internal("closed"));
  Check((*admin_pg)->Exec("DROP DATABASE IF EXISTS " + db_name + " WITH (FORCE)"), "drop database");
  return 0;
}

}  // namespace
}  // namespace gapless

int main(int argc, char** argv) { return gapless::Main(argc, argv); }
