// The contracts mode's decoded logs on the buses (issue 36), end to end on a Redis Streams bus: a
// private anvil runs devnet/events.js (contracts whose events carry every ABI type, a factory and
// its pools), `gapless index --contracts ... --events redis://...` publishes every decoded row as
// one event of type {schema}.{contract}.{event} with the deterministic id and a payload that
// viem's reading of the node's logs confirms (devnet/decode_check.js, fed with the payloads); the
// outbox counts them; a rollback's block.reverted names their ids; blocks committed while a
// fleet follows the tip are "live", history "backfill", and `events replay` sends the same bytes;
// RabbitMQ routes them by type.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "contracts_util.h"
#include "coord/redis.h"
#include "devnet_util.h"
#include "events/event.h"
#include "events/open_bus.h"
#include "store/decoded_events.h"
#include "store/outbox.h"
#include "store/rollback.h"
#include "testing/rabbitmq_server.h"
#include "testing/redis_server.h"
#include "testing/wait_for.h"

namespace gapless::e2e {
namespace {

const std::string& kSource = kContractsSource;
constexpr uint64_t kChainId = 31337;  // anvil's

// Every event on a Redis Streams bus (every stream but the dead letters), in stream order.
struct BusEvent {
  std::string body;
  Envelope envelope;
};
std::vector<BusEvent> ReadBus(const std::string& url) {
  std::vector<BusEvent> out;
  auto redis = RedisConn::Connect(url);
  EXPECT_TRUE(redis.ok()) << redis.status().ToString();
  if (!redis.ok()) return out;
  auto keys = (*redis)->Command({"KEYS", "*"});
  EXPECT_TRUE(keys.ok());
  if (!keys.ok()) return out;
  for (const RedisReply& key : keys->elements) {
    if (key.str.ends_with(".dlq")) continue;
    auto entries = (*redis)->Command({"XRANGE", key.str, "-", "+"});
    EXPECT_TRUE(entries.ok()) << key.str;
    if (!entries.ok()) continue;
    for (const RedisReply& entry : entries->elements) {
      const auto& fields = entry.elements[1].elements;
      for (size_t i = 0; i + 1 < fields.size(); i += 2) {
        if (fields[i].str != "body") continue;
        auto env = ParseEnvelope(fields[i + 1].str);
        EXPECT_TRUE(env.ok()) << env.status().ToString() << " in " << fields[i + 1].str;
        if (env.ok()) out.push_back({fields[i + 1].str, std::move(env).value()});
      }
    }
  }
  return out;
}

// A decoded row as the table holds it.
struct TableRow {
  std::string event_type;
  std::string contract;
  std::string signature;
  uint64_t block = 0;
  std::string block_hash;
  uint64_t log_index = 0;
  std::string transaction_hash;
  std::string address;
};

class ContractsEventsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    chain_ = StartPrivateChain(0, 1, "contracts-events-anvil").release();
    if (chain_ == nullptr) return;
    dir_ = ::testing::TempDir() + "contracts-events-" + std::to_string(getpid());
    const std::string problem =
        DeployContractsDevnet(chain_->url, dir_, 8, &last_, &pools_created_by_);
    ASSERT_EQ(problem, "");
  }
  static void TearDownTestSuite() {
    delete chain_;
    chain_ = nullptr;
  }

  void SetUp() override {
    if (chain_ == nullptr) GTEST_SKIP() << "GAPLESS_ANVIL not set";
    if (db_.skipped()) GTEST_SKIP() << "GAPLESS_TEST_PG_URL not set";
    ASSERT_FALSE(db_.failed()) << db_.error().ToString();
    auto bus = RedisServer::Start();
    ASSERT_TRUE(bus.ok()) << bus.status().ToString();
    bus_ = std::move(bus).value();
  }

  std::string Config() const { return dir_ + "/contracts.yaml"; }

  // `gapless index` of blocks 0..last_ with the config; its exit code.
  int Index(std::vector<std::string> extra = {}, uint64_t from = 0) {
    std::vector<std::string> args = {GaplessBinary(), "index",
                                     "--rpc",         chain_->url,
                                     "--db",          db_.url(),
                                     "--from",        std::to_string(from),
                                     "--to",          std::to_string(last_),
                                     "--range-size",  "5",
                                     "--progress",    "off",
                                     "--contracts",   Config()};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = dir_ + ".index-" + std::to_string(++runs_) + ".log";
    const int rc = WaitForExit(Spawn(args, log), 300);
    if (rc != 0) ADD_FAILURE() << ReadFile(log);
    return rc;
  }

  std::unique_ptr<PgConn> Conn() {
    auto conn = db_.Connect();
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    return conn.ok() ? std::move(conn).value() : nullptr;
  }

  int64_t Count(const std::string& sql) {
    auto res = Conn()->Query(sql);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return res.ok() ? std::stoll(std::string(res->Get(0, 0))) : -1;
  }

  // Every row of the schema's registered tables.
  std::vector<TableRow> Rows(const std::string& where = "") {
    auto conn = Conn();
    std::vector<TableRow> out;
    auto tables = conn->Query(
        "SELECT table_name, contract, event_signature FROM decoded_tables"
        " WHERE schema_name = 'zoo' AND contract <> '' ORDER BY 1");
    EXPECT_TRUE(tables.ok());
    for (int t = 0; tables.ok() && t < tables->rows(); ++t) {
      const std::string table(tables->Get(t, 0));
      auto rows = conn->Query(
          "SELECT block_number, '0x' || encode(block_hash, 'hex'), log_index,"
          " '0x' || encode(transaction_hash, 'hex'), '0x' || encode(address, 'hex') FROM zoo.\"" +
          table + "\"" + where);
      EXPECT_TRUE(rows.ok()) << rows.status().ToString();
      for (int i = 0; rows.ok() && i < rows->rows(); ++i) {
        TableRow r;
        r.event_type = DecodedEventType("zoo", tables->Get(t, 1), table);
        r.contract = std::string(tables->Get(t, 1));
        r.signature = std::string(tables->Get(t, 2));
        r.block = std::stoull(std::string(rows->Get(i, 0)));
        r.block_hash = std::string(rows->Get(i, 1));
        r.log_index = std::stoull(std::string(rows->Get(i, 2)));
        r.transaction_hash = std::string(rows->Get(i, 3));
        r.address = std::string(rows->Get(i, 4));
        out.push_back(std::move(r));
      }
    }
    return out;
  }

  // The blocks whose outbox row counts 1 + transactions + token transfers + decoded rows.
  int64_t BlocksCountedRight() {
    std::string decoded = "0";
    auto tables = Conn()->Query(
        "SELECT table_name FROM decoded_tables WHERE schema_name = 'zoo' AND contract <> ''");
    EXPECT_TRUE(tables.ok());
    for (int i = 0; tables.ok() && i < tables->rows(); ++i) {
      decoded += " + (SELECT count(*) FROM zoo.\"" + std::string(tables->Get(i, 0)) +
                 "\" d WHERE d.block_number = b.number)";
    }
    return Count(
        "SELECT count(*) FROM blocks b JOIN event_outbox o ON o.block_number = b.number"
        " WHERE o.event_count = 1 + (SELECT count(*) FROM transactions t"
        " WHERE t.block_number = b.number) + (SELECT count(*) FROM token_transfers x"
        " WHERE x.block_number = b.number) + " +
        decoded);
  }

  static PrivateChain* chain_;
  static std::string dir_;
  static uint64_t last_;
  static uint64_t pools_created_by_;
  static inline int runs_ = 0;
  PgTestDb db_;
  std::unique_ptr<RedisServer> bus_;
};

PrivateChain* ContractsEventsTest::chain_ = nullptr;
std::string ContractsEventsTest::dir_;
uint64_t ContractsEventsTest::last_ = 0;
uint64_t ContractsEventsTest::pools_created_by_ = 0;

// The payload's members as (name, raw JSON), in order.
std::vector<std::pair<std::string, std::string>> Members(const std::string& payload) {
  std::vector<std::pair<std::string, std::string>> out;
  simdjson::dom::parser parser;
  simdjson::dom::object o;
  EXPECT_EQ(parser.parse(payload).get_object().get(o), simdjson::SUCCESS) << payload;
  for (auto field : o) {
    out.emplace_back(std::string(field.key), simdjson::minify(field.value));
  }
  return out;
}

TEST_F(ContractsEventsTest, EveryDecodedRowIsOneEventCountedInTheOutboxAndViemAgrees) {
  // Written first without a relay, events enabled: the outbox rows stay to be looked at.
  {
    auto migrated = db_.ConnectMigrated();
    ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
    ASSERT_TRUE(EnableEvents(**migrated, 0).ok());
  }
  ASSERT_EQ(Index(), 0);
  const std::vector<TableRow> rows = Rows();
  ASSERT_GT(rows.size(), 50u);
  // Each block's event count: 1 + transactions + token transfers + its decoded rows.
  EXPECT_EQ(BlocksCountedRight(), static_cast<int64_t>(last_ + 1));
  // (contract "\n" signature) -> ("block/log", payload): every table, with rows or not.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> payloads;
  {
    auto tables = Conn()->Query(
        "SELECT table_name, contract, event_signature FROM decoded_tables"
        " WHERE schema_name = 'zoo' AND contract <> ''");
    ASSERT_TRUE(tables.ok());
    for (int i = 0; i < tables->rows(); ++i) {
      payloads[std::string(tables->Get(i, 1)) + "\n" + std::string(tables->Get(i, 2))];
    }
  }
  EXPECT_EQ(Count("SELECT sum(event_count) - (SELECT count(*) FROM blocks)"
                  " - (SELECT count(*) FROM transactions) - (SELECT count(*) FROM token_transfers)"
                  " FROM event_outbox"),
            static_cast<int64_t>(rows.size()));

  // Now published.
  ASSERT_EQ(Index({"--events", bus_->url()}), 0);
  const std::vector<BusEvent> bus = ReadBus(bus_->url());
  std::map<std::string, std::vector<const BusEvent*>> by_id;
  size_t decoded_on_bus = 0;
  for (const BusEvent& e : bus) {
    by_id[e.envelope.event_id].push_back(&e);
    EXPECT_EQ(e.envelope.phase, "backfill") << e.body;
    if (e.envelope.event_type.starts_with("zoo.")) ++decoded_on_bus;
  }
  EXPECT_EQ(decoded_on_bus, rows.size());
  // Each row: exactly one event, its type and id, the row's own columns in its payload.
  for (const TableRow& r : rows) {
    const std::string id = DecodedEventId(kChainId, r.event_type, r.block_hash, r.log_index);
    auto found = by_id.find(id);
    ASSERT_NE(found, by_id.end()) << r.event_type << " block " << r.block << " log " << r.log_index;
    ASSERT_EQ(found->second.size(), 1u) << id;
    const Envelope& env = found->second[0]->envelope;
    EXPECT_EQ(env.event_type, r.event_type);
    EXPECT_EQ(env.chain_id, kChainId);
    auto members = Members(env.payload_json);
    ASSERT_GE(members.size(), 8u);
    const std::vector<std::pair<std::string, std::string>> fixed = {
        {"chain_id", std::to_string(kChainId)},
        {"block_number", std::to_string(r.block)},
        {"block_hash", "\"" + r.block_hash + "\""},
        {"block_timestamp", members[3].second},
        {"transaction_hash", "\"" + r.transaction_hash + "\""},
        {"transaction_index", members[5].second},
        {"log_index", std::to_string(r.log_index)},
        {"address", "\"" + r.address + "\""}};
    for (size_t i = 0; i < fixed.size(); ++i) EXPECT_EQ(members[i], fixed[i]) << env.payload_json;
    payloads[r.contract + "\n" + r.signature].emplace_back(
        std::to_string(r.block) + "/" + std::to_string(r.log_index), env.payload_json);
  }
  // The outbox counted what the relay sent: every event once (a clean run).
  auto cursors = LoadCursors(*Conn());
  ASSERT_TRUE(cursors.ok());
  ASSERT_EQ(cursors->size(), 1u);
  EXPECT_EQ((*cursors)[0].events_sent, bus.size());

  // viem's reading of the node's logs against the payloads: decode_check.js's dump, its values
  // taken from the events (integers as decimal text at the top level, as the dump has them).
  std::string dump = "{\"tables\": [";
  bool first_table = true;
  for (const auto& [key, list] : payloads) {
    const std::string contract = key.substr(0, key.find('\n'));
    const std::string signature = key.substr(key.find('\n') + 1);
    dump += std::string(first_table ? "" : ", ") + "{\"contract\": \"" + contract +
            "\", \"signature\": \"" + signature + "\", \"rows\": [";
    first_table = false;
    bool first_row = true;
    for (const auto& [where, payload] : list) {
      auto members = Members(payload);
      std::string values;
      for (size_t i = 8; i < members.size(); ++i) {
        const std::string& v = members[i].second;
        const bool number = !v.empty() && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9'));
        values += std::string(i > 8 ? ", " : "") + (number ? "\"" + v + "\"" : v);
      }
      dump += std::string(first_row ? "" : ", ") +
              "{\"block\": " + where.substr(0, where.find('/')) +
              ", \"log\": " + where.substr(where.find('/') + 1) + ", \"values\": [" + values + "]}";
      first_row = false;
    }
    dump += "]}";
  }
  auto undecoded = Conn()->Query(
      "SELECT coalesce(json_agg(json_build_object('block', u.block_number, 'log', u.log_index,"
      " 'contract', d.contract, 'signature', d.event_signature)), '[]')::text FROM zoo.undecoded u"
      " JOIN decoded_tables d ON d.schema_name = 'zoo' AND d.table_name = u.table_name");
  ASSERT_TRUE(undecoded.ok());
  dump += "], \"undecoded\": " + std::string(undecoded->Get(0, 0)) + "}";
  const std::string path = dir_ + ".bus-dump.json";
  std::ofstream(path) << dump;
  const int rc = RunNode({kSource + "/devnet/decode_check.js", "--rpc", chain_->url, "--dir", dir_,
                          "--dump", path, "--to", std::to_string(last_)},
                         path + ".log");
  const std::string line = ReadFile(path + ".log");
  EXPECT_EQ(rc, 0) << line;
  EXPECT_NE(line.find("equal viem's reading"), std::string::npos) << line;

  // A decoded type can be tailed by name.
  const std::string type = rows.front().event_type;
  const auto of_type = std::count_if(rows.begin(), rows.end(),
                                     [&](const TableRow& r) { return r.event_type == type; });
  auto [tailed, lines] = RunForOutput({GaplessBinary(), "events", "tail", "--bus", bus_->url(),
                                       "--chain-id", std::to_string(kChainId), "--type", type,
                                       "--from-beginning", "--count", std::to_string(of_type)});
  EXPECT_EQ(tailed, 0) << lines;
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), of_type) << lines;
  EXPECT_NE(lines.find("\"event_type\":\"" + type + "\""), std::string::npos) << lines;
}

TEST_F(ContractsEventsTest, ARollbackRetractsTheOrphanedBlocksDecodedEventsById) {
  ASSERT_EQ(Index({"--events", bus_->url()}), 0);
  const uint64_t fork = last_ - 6;
  const std::vector<TableRow> orphaned = Rows(" WHERE block_number > " + std::to_string(fork));
  ASSERT_GT(orphaned.size(), 0u);
  {
    RollbackRequest request;
    request.fork_point = fork;
    request.max_depth = 1000;
    auto rolled = RollBack(*Conn(), request);
    ASSERT_TRUE(rolled.ok()) << rolled.status().ToString();
  }
  // The next run publishes the retractions first, then the blocks again (the same hashes: a
  // block orphaned once comes back under incarnation 1, new ids).
  ASSERT_EQ(Index({"--events", bus_->url()}), 0);
  const std::vector<BusEvent> bus = ReadBus(bus_->url());
  std::map<uint64_t, std::set<std::string>> retracted;  // block -> ids
  std::map<std::string, int> seen;
  for (const BusEvent& e : bus) {
    ++seen[e.envelope.event_id];
    if (e.envelope.event_type != kBlockReverted) continue;
    EXPECT_EQ(e.envelope.phase, "live") << e.body;
    auto reverted = ParseBlockRevertedPayload(e.envelope.payload_json);
    ASSERT_TRUE(reverted.ok()) << reverted.status().ToString();
    retracted[reverted->block_number].insert(reverted->reverted_event_ids.begin(),
                                             reverted->reverted_event_ids.end());
  }
  EXPECT_EQ(retracted.size(), last_ - fork);
  for (const TableRow& r : orphaned) {
    const std::string id = DecodedEventId(kChainId, r.event_type, r.block_hash, r.log_index);
    EXPECT_TRUE(retracted[r.block].contains(id))
        << r.event_type << " block " << r.block << " log " << r.log_index << " not retracted";
    EXPECT_EQ(seen[id], 1) << "published once before the rollback";
    // The comeback: published again under new ids.
    EXPECT_EQ(seen[DecodedEventId(kChainId, r.event_type, r.block_hash, r.log_index, 1)], 1)
        << r.event_type << " block " << r.block << " log " << r.log_index;
  }
}

TEST_F(ContractsEventsTest, BlocksCommittedWhileFollowingAreLiveAndAReplaySendsTheSameBytes) {
  const char* redis = std::getenv("GAPLESS_TEST_REDIS_URL");
  if (redis == nullptr) GTEST_SKIP() << "GAPLESS_TEST_REDIS_URL not set";
  ClearChainKeys(redis, kChainId);
  const std::string log = dir_ + ".follow.log";
  pid_t run =
      Spawn({GaplessBinary(), "run",          "--rpc",  chain_->url, "--db",     db_.url(),
             "--redis",       redis,          "--from", "0",         "--to",     "latest",
             "--follow",      "--range-size", "5",      "--workers", "2",        "--progress",
             "off",           "--contracts",  Config(), "--events",  bus_->url()},
            log);
  auto block_new_of = [&](uint64_t n) {
    for (const BusEvent& e : ReadBus(bus_->url())) {
      if (e.envelope.event_type == kBlockNew &&
          e.envelope.payload_json.find("\"block_number\":" + std::to_string(n) + ",") !=
              std::string::npos) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(testing_util::WaitFor([&] { return block_new_of(last_); }, 120'000)) << ReadFile(log);
  // New blocks while it follows.
  auto rpc = ClientsFor(chain_->url)();
  auto mined = rpc->Call("anvil_mine", "[\"0x3\"]");
  ASSERT_TRUE(mined.ok()) << mined.status().ToString();
  const uint64_t top = last_ + 3;
  ASSERT_TRUE(testing_util::WaitFor([&] { return block_new_of(top); }, 120'000)) << ReadFile(log);
  kill(run, SIGTERM);
  const int stopped = WaitForExit(run, 60);
  EXPECT_TRUE(stopped == 0 || stopped == 130) << stopped << ReadFile(log);

  const std::vector<BusEvent> bus = ReadBus(bus_->url());
  std::map<std::string, std::string> body_by_id;
  size_t live = 0, backfill = 0;
  for (const BusEvent& e : bus) {
    body_by_id[e.envelope.event_id] = e.body;
    if (e.envelope.event_type != kBlockNew) continue;
    simdjson::dom::parser parser;
    uint64_t n = 0;
    ASSERT_EQ(parser.parse(e.envelope.payload_json)["block_number"].get_uint64().get(n),
              simdjson::SUCCESS);
    // History up to the tip the leader found when it started; the blocks mined since, live.
    EXPECT_EQ(e.envelope.phase, n > last_ ? "live" : "backfill") << "block " << n;
    (n > last_ ? live : backfill) += 1;
  }
  EXPECT_EQ(live, 3u);
  EXPECT_EQ(backfill, last_ + 1);
  // The decoded events of the history: backfill too.
  size_t decoded_backfill = 0;
  for (const BusEvent& e : bus) {
    if (e.envelope.event_type.starts_with("zoo.") && e.envelope.phase == "backfill") {
      ++decoded_backfill;
    }
  }
  EXPECT_EQ(decoded_backfill, Rows().size());

  // The same events again from the database, to another bus: byte for byte the first ones.
  auto again = RedisServer::Start();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto [rc, out] = RunForOutput({GaplessBinary(), "events", "replay", "--db", db_.url(), "--bus",
                                 (*again)->url(), "--from", "0", "--to", std::to_string(top),
                                 "--contracts", Config()});
  ASSERT_EQ(rc, 0) << out;
  const std::vector<BusEvent> replayed = ReadBus((*again)->url());
  size_t decoded = 0;
  for (const BusEvent& e : replayed) {
    if (e.envelope.event_type.starts_with("zoo.")) ++decoded;
    auto first = body_by_id.find(e.envelope.event_id);
    ASSERT_NE(first, body_by_id.end()) << e.body;
    EXPECT_EQ(e.body, first->second);
  }
  EXPECT_EQ(replayed.size(), body_by_id.size());
  EXPECT_EQ(decoded, Rows().size());
}

// A factory's children found after the blocks above them were committed: the finder decodes
// their logs there, and those blocks' outbox rows count them.
TEST_F(ContractsEventsTest, OutboxRowsAboveALateFoundChildCountItsDecodedRows) {
  {
    auto migrated = db_.ConnectMigrated();
    ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
    ASSERT_TRUE(EnableEvents(**migrated, 0).ok());
  }
  ASSERT_EQ(Index({}, pools_created_by_ + 1), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM zoo.pools_swap"), 0);
  ASSERT_EQ(Index(), 0);
  ASSERT_GT(Count("SELECT count(*) FROM zoo.pools_swap WHERE block_number > " +
                  std::to_string(pools_created_by_)),
            0);
  EXPECT_EQ(BlocksCountedRight(), static_cast<int64_t>(last_ + 1));
}

// Blocks committed before the config existed lack its tables: the relay waits at them until
// `index --contracts` has written their ranges again, then publishes each decoded row once (never
// a block without its decoded events).
TEST_F(ContractsEventsTest, BlocksWrittenBeforeTheConfigWaitForTheirDecodedRows) {
  {
    std::vector<std::string> args = {
        GaplessBinary(), "index",  "--rpc",      chain_->url, "--db",
        db_.url(),       "--from", "0",          "--to",      std::to_string(last_),
        "--range-size",  "5",      "--progress", "off"};
    ASSERT_EQ(WaitForExit(Spawn(args, dir_ + ".plain.log"), 300), 0)
        << ReadFile(dir_ + ".plain.log");
  }
  // Events from block 0 on: the relay finds every block without an outbox row and backfills it,
  // while the same run writes the ranges again with the decoded tables.
  ASSERT_TRUE(EnableEvents(*Conn(), 0).ok());
  ASSERT_EQ(Index({"--events", bus_->url()}), 0);
  const std::vector<TableRow> rows = Rows();
  ASSERT_GT(rows.size(), 50u);
  std::map<std::string, int> seen;
  for (const BusEvent& e : ReadBus(bus_->url())) ++seen[e.envelope.event_id];
  EXPECT_EQ(seen.size(), ReadBus(bus_->url()).size()) << "an event was published twice";
  for (const TableRow& r : rows) {
    EXPECT_EQ(seen[DecodedEventId(kChainId, r.event_type, r.block_hash, r.log_index)], 1)
        << r.event_type << " block " << r.block << " log " << r.log_index;
  }
}

// The same events on RabbitMQ (its own node): each decoded row once, routed by its type, sent by
// `events replay --contracts` (the relay's builder, CommittedBlockEvents, on any bus).
TEST_F(ContractsEventsTest, RabbitMqCarriesEachDecodedRowOnceByItsType) {
  ASSERT_EQ(Index(), 0);
  const std::vector<TableRow> rows = Rows();
  ASSERT_GT(rows.size(), 50u);
  auto rabbit = RabbitMqServer::Start();
  ASSERT_TRUE(rabbit.ok()) << rabbit.status().ToString();
  SubscribeOptions options;
  options.group = "zoo-consumer";
  std::set<std::string> types;
  for (const TableRow& r : rows) types.insert(r.event_type);
  for (const std::string& type : types) options.topics.push_back(EventTopic(type, kChainId));
  auto subscriber = OpenSubscriber((*rabbit)->url(), options);  // declares and binds its queue
  ASSERT_TRUE(subscriber.ok()) << subscriber.status().ToString();
  auto [rc, out] = RunForOutput({GaplessBinary(), "events", "replay", "--db", db_.url(), "--bus",
                                 (*rabbit)->url(), "--from", "0", "--to", std::to_string(last_),
                                 "--contracts", Config()});
  ASSERT_EQ(rc, 0) << out;
  std::map<std::string, Envelope> received;
  size_t deliveries = 0;
  ASSERT_TRUE(testing_util::WaitFor(
      [&] {
        auto batch = (*subscriber)->Poll(500, 200);
        if (!batch.ok()) return false;
        for (const Delivery& d : *batch) {
          auto env = ParseEnvelope(d.body);
          EXPECT_TRUE(env.ok()) << d.body;
          if (env.ok()) received[env->event_id] = std::move(env).value();
          ++deliveries;
          EXPECT_TRUE((*subscriber)->Ack(d).ok());
        }
        return deliveries >= rows.size();
      },
      60'000))
      << deliveries << " of " << rows.size();
  EXPECT_EQ(deliveries, rows.size());
  for (const TableRow& r : rows) {
    auto found = received.find(DecodedEventId(kChainId, r.event_type, r.block_hash, r.log_index));
    ASSERT_NE(found, received.end()) << r.event_type << " block " << r.block;
    EXPECT_EQ(found->second.event_type, r.event_type);
    EXPECT_EQ(found->second.phase, "backfill");
  }
}

}  // namespace
}  // namespace gapless::e2e
