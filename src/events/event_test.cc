#include "events/event.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "events/open_bus.h"
#include "store/testdata.h"

namespace gapless {
namespace {

TEST(NameBasedUuid, MatchesRfc4122Version5) {
  // Python: uuid.uuid5(uuid.NAMESPACE_DNS, "python.org").
  EXPECT_EQ(NameBasedUuid("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "python.org"),
            "886313e1-3b8a-5372-9b90-0c9aee199e5d");
  // uuid.uuid5(uuid.NAMESPACE_URL, "https://example.com/a")
  EXPECT_EQ(NameBasedUuid("6ba7b811-9dad-11d1-80b4-00c04fd430c8", "https://example.com/a"),
            "6639460f-3425-5329-8097-a58f06127860");
}

TEST(EventId, DependsOnChainTypeAndIdentityOnly) {
  std::string a = EventId(1, kBlockNew, "0xaa");
  EXPECT_EQ(a, EventId(1, kBlockNew, "0xaa"));
  EXPECT_NE(a, EventId(2, kBlockNew, "0xaa"));
  EXPECT_NE(a, EventId(1, kTransactionConfirmed, "0xaa"));
  EXPECT_NE(a, EventId(1, kBlockNew, "0xab"));
  EXPECT_EQ(a.size(), 36u);
  EXPECT_EQ(a[14], '5');
}

TEST(IsoTime, FormatsUtc) {
  EXPECT_EQ(IsoTime(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(IsoTime(1704067200), "2024-01-01T00:00:00Z");
}

TEST(BlockEvents, OneBlockNewThenTransactionsThenTransfersWithStableIds) {
  BlockData data = SyntheticBlock(
      100, {.transactions_per_block = 5, .logs_per_block = 12, .token_transfers_per_block = 6});
  ASSERT_FALSE(data.token_transfers.empty());
  std::vector<OutgoingEvent> events = BlockEvents(7, data);
  ASSERT_EQ(events.size(), 1 + data.transactions.size() + data.token_transfers.size());
  EXPECT_EQ(events[0].event_type, "block.new");
  EXPECT_EQ(events[0].topic, "block.new.7");
  EXPECT_EQ(events[0].key, "7");
  for (size_t i = 0; i < data.transactions.size(); ++i) {
    EXPECT_EQ(events[1 + i].event_type, "transaction.confirmed");
    EXPECT_EQ(events[1 + i].topic, "transaction.confirmed.7");
  }
  EXPECT_EQ(events.back().topic, "token.transfer.7");
  // Deterministic: the same block gives byte-identical envelopes; every id is distinct.
  std::vector<OutgoingEvent> again = BlockEvents(7, data);
  std::set<std::string> ids;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].body, again[i].body);
    ids.insert(events[i].event_id);
  }
  EXPECT_EQ(ids.size(), events.size());
}

// The token's symbol and decimals travel with its transfers where the block carries them
// (store/reader.h reads them from the tokens table); null otherwise, and never in a retraction.
TEST(BlockEvents, TransfersCarryTheTokensSymbolAndDecimalsWhenKnown) {
  BlockData data = SyntheticBlock(
      42, {.transactions_per_block = 1, .logs_per_block = 4, .token_transfers_per_block = 2});
  ASSERT_GE(data.token_transfers.size(), 2u);
  data.token_transfers[1].token_address = "0x" + std::string(40, '7');
  Token known;
  known.address = data.token_transfers[0].token_address;
  known.symbol = "GDT";
  known.decimals = 18;
  data.tokens = {known};
  std::vector<OutgoingEvent> events = BlockEvents(1, data);
  std::vector<TransferEvent> transfers;
  for (const OutgoingEvent& e : events) {
    Result<Envelope> env = ParseEnvelope(e.body);
    ASSERT_TRUE(env.ok());
    if (env->event_type != kTokenTransfer) continue;
    Result<TransferEvent> t = ParseTransferPayload(env->payload_json);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    transfers.push_back(*t);
  }
  ASSERT_GE(transfers.size(), 2u);
  EXPECT_EQ(transfers[0].token_symbol, std::optional<std::string>("GDT"));
  EXPECT_EQ(transfers[0].token_decimals, std::optional<uint64_t>(18));
  EXPECT_FALSE(transfers[1].token_symbol.has_value());
  EXPECT_FALSE(transfers[1].token_decimals.has_value());
  Result<Envelope> reverted = ParseEnvelope(BlockRevertedEvent(1, data, 1, 0).body);
  ASSERT_TRUE(reverted.ok());
  Result<RevertedBlock> r = ParseBlockRevertedPayload(reverted->payload_json);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->token_transfers.empty());
  EXPECT_FALSE(r->token_transfers[0].second.token_symbol.has_value());
}

// trace.internal_transfer: one event per frame below the top that moved value (a CALL, create,
// create2 or self-destruct that succeeded with value > 0), after the token transfers; the
// block.reverted of the block names each of them.
TEST(BlockEvents, InternalTransfersAreEventsAndTheirRetractionNamesThem) {
  BlockData data = SyntheticBlock(
      7, {.transactions_per_block = 1, .logs_per_block = 0, .token_transfers_per_block = 0});
  auto frame = [&](std::vector<uint32_t> path, std::string type, std::optional<std::string> call,
                   uint64_t value, int status) {
    Trace t;
    t.block_number = 7;
    t.transaction_hash = data.transactions[0].hash;
    t.transaction_index = 0;
    t.trace_address = std::move(path);
    t.trace_type = std::move(type);
    t.call_type = std::move(call);
    t.from_address = "0x" + std::string(40, '1');
    t.to_address = "0x" + std::string(40, '2');
    t.value = U256(value);
    t.status = status;
    return t;
  };
  data.traces = {frame({}, "call", "call", 5, 1),              // the top frame: a transaction
                 frame({0}, "call", "call", 3, 1),             // moved
                 frame({0, 0}, "call", "delegatecall", 3, 1),  // no value moves
                 frame({1}, "call", "call", 0, 1),             // nothing to move
                 frame({2}, "call", "call", 4, 0),             // reverted
                 frame({3}, "create2", std::nullopt, 9, 1),    // moved into a new contract
                 frame({4}, "suicide", std::nullopt, 2, 1)};   // a self-destruct's balance
  std::vector<std::string> ids;
  std::vector<std::string> paths;
  for (const OutgoingEvent& e : BlockEvents(1, data)) {
    Result<Envelope> env = ParseEnvelope(e.body);
    ASSERT_TRUE(env.ok());
    if (env->event_type != kInternalTransfer) continue;
    ids.push_back(env->event_id);
    const size_t at = env->payload_json.find("\"trace_address\":");
    ASSERT_NE(at, std::string::npos) << env->payload_json;
    paths.push_back(env->payload_json.substr(at + 16, env->payload_json.find(']', at) - at - 15));
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"[0]", "[3]", "[4]"}));
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], InternalTransferEventId(1, data.block.hash, data.traces[1]));
  EXPECT_NE(ids[0], InternalTransferEventId(1, data.block.hash, data.traces[1], 1))
      << "a block back from orphanhood must give new ids";
  Result<Envelope> reverted = ParseEnvelope(BlockRevertedEvent(1, data, 1, 0).body);
  ASSERT_TRUE(reverted.ok());
  Result<RevertedBlock> r = ParseBlockRevertedPayload(reverted->payload_json);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const std::string& id : ids) {
    EXPECT_NE(std::find(r->reverted_event_ids.begin(), r->reverted_event_ids.end(), id),
              r->reverted_event_ids.end());
  }
}

TEST(BlockEvents, EnvelopeParsesBackWithItsPayload) {
  BlockData data = SyntheticBlock(
      42, {.transactions_per_block = 3, .logs_per_block = 10, .token_transfers_per_block = 4});
  std::vector<OutgoingEvent> events = BlockEvents(31337, data);
  Result<Envelope> block = ParseEnvelope(events[0].body);
  ASSERT_TRUE(block.ok()) << block.status().message();
  EXPECT_EQ(block->event_type, "block.new");
  EXPECT_EQ(block->event_id, events[0].event_id);
  EXPECT_EQ(block->chain_id, 31337u);
  EXPECT_EQ(block->timestamp, IsoTime(data.block.timestamp));
  EXPECT_EQ(block->producer, "gapless");
  EXPECT_EQ(block->version, "1.0");
  EXPECT_NE(block->payload_json.find("\"hash\":\"" + data.block.hash + "\""), std::string::npos);
  EXPECT_NE(block->payload_json.find("\"block_number\":42"), std::string::npos);

  const TokenTransfer& want = data.token_transfers.front();
  const OutgoingEvent& first_transfer = events[1 + data.transactions.size()];
  Result<Envelope> env = ParseEnvelope(first_transfer.body);
  ASSERT_TRUE(env.ok()) << env.status().message();
  Result<TransferEvent> t = ParseTransferPayload(env->payload_json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->token_address, want.token_address);
  EXPECT_EQ(t->from_address, want.from_address);
  EXPECT_EQ(t->to_address, want.to_address);
  EXPECT_EQ(t->amount, want.value.ToDecimal());
  EXPECT_EQ(t->token_id.has_value(), want.token_id.has_value());
  EXPECT_EQ(t->token_standard, TokenStandardName(want.standard));
  EXPECT_EQ(t->transaction_hash, want.transaction_hash);
  EXPECT_EQ(t->log_index, want.log_index);
  EXPECT_EQ(t->batch_index, want.batch_index);
  EXPECT_EQ(t->block_number, 42u);
  EXPECT_EQ(t->block_hash, data.block.hash);
}

uint64_t Fnv1a(uint64_t h, std::string_view s) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h ^ 0xff;  // a field separator
}

// The exact bytes of every event of a mainnet-shaped block (with internal transfers, a token whose
// symbol needs escaping, and a block incarnation above 0) and of its block.reverted: an event
// published again (a retry, a relay that crashed before its cursor moved, `events replay`) must be
// byte for byte the one sent before, so however envelopes come to be built, this digest must not
// change. The first events in full show where a difference is.
TEST(BlockEvents, AreByteForByteTheEventsPublishedBefore) {
  BlockData data = SyntheticBlock(17'000'000, {.traces_per_block = 40});
  ASSERT_FALSE(data.token_transfers.empty());
  Token token;
  token.address = data.token_transfers[0].token_address;
  token.symbol = "G\"D\\T\n\x01";
  token.decimals = 18;
  data.tokens.push_back(token);
  for (uint32_t i = 0; i < 3; ++i) {  // internal transfers: a call, a create2, a self-destruct
    Trace t;
    t.block_number = data.block.number;
    t.transaction_hash = data.transactions[i].hash;
    t.transaction_index = i;
    t.trace_address = {i, 1};
    t.trace_type = i == 0 ? "call" : i == 1 ? "create2" : "suicide";
    if (i == 0) t.call_type = "call";
    t.from_address = data.transactions[i].from_address;
    t.to_address = data.transactions[i].to_address;
    t.value = U256(1000 + i);
    t.status = 1;
    data.traces.push_back(std::move(t));
  }
  uint64_t h = 14695981039346656037ull;
  size_t count = 0, internal = 0;
  std::vector<OutgoingEvent> first;
  for (uint64_t incarnation : {0, 2}) {
    std::vector<OutgoingEvent> events = BlockEvents(1, data, incarnation);
    for (const OutgoingEvent& e : events) {
      for (std::string_view field :
           {std::string_view(e.topic), std::string_view(e.key), std::string_view(e.event_type),
            std::string_view(e.event_id), std::string_view(e.body)}) {
        h = Fnv1a(h, field);
      }
      h = Fnv1a(h, std::to_string(e.partition));
      ++count;
      if (e.event_type == kInternalTransfer) ++internal;
    }
    if (incarnation == 0) first = std::move(events);
  }
  const OutgoingEvent reverted = BlockRevertedEvent(1, data, 3, 1'700'000'000, 2);
  h = Fnv1a(h, reverted.event_id);
  h = Fnv1a(h, reverted.body);
  EXPECT_EQ(count, 2 * (1 + data.transactions.size() + data.token_transfers.size() + internal / 2));
  EXPECT_EQ(internal, 6u);
  // Changed once on purpose: metadata.phase (issue 36), the bodies below show where.
  EXPECT_EQ(h, 10814454204793287257ull) << "the bytes of the events changed";
  ASSERT_GT(first.size(), 1 + data.transactions.size());
  EXPECT_EQ(
      first[0].body,
      R"json({"event_type":"block.new","event_id":"eec19633-e65a-5e66-9c2f-343a47dc8fd4","timestamp":"2027-03-02T15:06:40Z","chain_id":1,"payload":{"chain_id":1,"block_number":17000000,"hash":"0x64ed074405239a46a61af627ba0a6f21354d15f7af2f861d2b79222e28b47968","parent_hash":"0x40a4b2e8fb0f6085bfa57d5e03b1ac4c879409fd0ba0c64e81c67dbac0a4a938","timestamp":"2027-03-02T15:06:40Z","transaction_count":150,"miner":"0x5f9e2686aa5b9de6f2d30989f88ba01c930afed6","gas_used":18790616,"gas_limit":30000000,"base_fee_per_gas":"15926703935"},"metadata":{"producer":"gapless","version":"1.0","phase":"backfill"}})json");
  EXPECT_EQ(
      first[1].body,
      R"json({"event_type":"transaction.confirmed","event_id":"78ce5652-fb59-5aea-8b16-c00e10154fff","timestamp":"2027-03-02T15:06:40Z","chain_id":1,"payload":{"chain_id":1,"hash":"0xb327b09672801354aeca4f65a5049279c96ad725cd63b366f323a8a461c509c4","block_number":17000000,"block_hash":"0x64ed074405239a46a61af627ba0a6f21354d15f7af2f861d2b79222e28b47968","transaction_index":0,"from_address":"0xbf2434ebcce3bed1e17f10a29faee803de2562cd","to_address":"0x826c3f332cb3fa382017da72c60546f0e16b2d24","contract_address":null,"value":"48544125517076989852938865","status":"success","gas_used":158908,"effective_gas_price":"79107829989"},"metadata":{"producer":"gapless","version":"1.0","phase":"backfill"}})json");
  EXPECT_EQ(
      first[1 + data.transactions.size()].body,
      R"json({"event_type":"token.transfer","event_id":"2ad8f523-8425-5b9a-b74c-f367efe9c17a","timestamp":"2027-03-02T15:06:40Z","chain_id":1,"payload":{"chain_id":1,"token_address":"0xdfed9a80d3860dba9a020447ab15f878cd1a4b4a","token_standard":"erc20","token_symbol":"G\"D\\T\n\u0001","token_decimals":18,"from_address":"0x0532a470b23de51d5c1b2f3992c2f3b77303bb0c","to_address":"0x2bfdb5b1eb5bec4650e5f95ba99535f5bee16e8d","amount":"638007929717901041396695937010","token_id":null,"operator_address":null,"transaction_hash":"0xb327b09672801354aeca4f65a5049279c96ad725cd63b366f323a8a461c509c4","log_index":0,"batch_index":0,"block_number":17000000,"block_hash":"0x64ed074405239a46a61af627ba0a6f21354d15f7af2f861d2b79222e28b47968"},"metadata":{"producer":"gapless","version":"1.0","phase":"backfill"}})json");
  EXPECT_EQ(
      first.back().body,
      R"json({"event_type":"trace.internal_transfer","event_id":"62081ecb-6fe7-57c6-9798-ef7ee39afc9d","timestamp":"2027-03-02T15:06:40Z","chain_id":1,"payload":{"chain_id":1,"block_number":17000000,"block_hash":"0x64ed074405239a46a61af627ba0a6f21354d15f7af2f861d2b79222e28b47968","transaction_hash":"0xc6dc03ce9ced2ebb4335d3710c67c7c17673113387dc80e0f52ac14d4e56ec9f","transaction_index":2,"trace_address":[2,1],"trace_type":"suicide","from_address":"0x3753e723d713c9546578562872cb015a2809a015","to_address":"0x61e0293ea0d1d3deb17d4084635ea570eb858941","value":"1002"},"metadata":{"producer":"gapless","version":"1.0","phase":"backfill"}})json");
}

// A retraction names exactly the ids BlockEvents gave, from the little a retraction keeps (the
// block's hash, its transactions' hashes, its transfers), and carries each transfer's details.
TEST(BlockRevertedEvent, NamesEveryPublishedIdAndTheTransfersDetails) {
  BlockData data = SyntheticBlock(
      77, {.transactions_per_block = 4, .logs_per_block = 12, .token_transfers_per_block = 6});
  ASSERT_FALSE(data.token_transfers.empty());
  std::vector<OutgoingEvent> published = BlockEvents(5, data);
  BlockData kept;  // what store/retractions.h reads back
  kept.block.number = data.block.number;
  kept.block.hash = data.block.hash;
  for (const Transaction& t : data.transactions) {
    Transaction h;
    h.hash = t.hash;
    kept.transactions.push_back(h);
  }
  kept.token_transfers = data.token_transfers;

  OutgoingEvent reverted = BlockRevertedEvent(5, kept, 3, 1'700'000'000);
  EXPECT_EQ(reverted.event_type, "block.reverted");
  EXPECT_EQ(reverted.topic, "block.reverted.5");
  EXPECT_EQ(reverted.key, "5");
  EXPECT_EQ(reverted.event_id, EventId(5, kBlockReverted, data.block.hash + "/3"));
  EXPECT_NE(BlockRevertedEvent(5, kept, 4, 1'700'000'000).event_id, reverted.event_id)
      << "the same block orphaned by another rollback is another retraction";
  EXPECT_EQ(BlockRevertedEvent(5, kept, 3, 1'700'000'000).body, reverted.body);
  Result<Envelope> env = ParseEnvelope(reverted.body);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->timestamp, IsoTime(1'700'000'000));
  Result<RevertedBlock> r = ParseBlockRevertedPayload(env->payload_json);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->block_number, 77u);
  EXPECT_EQ(r->block_hash, data.block.hash);
  EXPECT_EQ(r->reorg_generation, 3u);
  ASSERT_EQ(r->reverted_event_ids.size(), published.size());
  for (size_t i = 0; i < published.size(); ++i) {
    EXPECT_EQ(r->reverted_event_ids[i], published[i].event_id) << "event " << i;
  }
  ASSERT_EQ(r->token_transfers.size(), data.token_transfers.size());
  const size_t first_transfer = 1 + data.transactions.size();
  for (size_t i = 0; i < data.token_transfers.size(); ++i) {
    const auto& [id, t] = r->token_transfers[i];
    EXPECT_EQ(id, published[first_transfer + i].event_id);
    // The details equal the original token.transfer's payload.
    Result<TransferEvent> original =
        ParseTransferPayload(ParseEnvelope(published[first_transfer + i].body)->payload_json);
    ASSERT_TRUE(original.ok());
    EXPECT_EQ(t.token_address, original->token_address);
    EXPECT_EQ(t.token_standard, original->token_standard);
    EXPECT_EQ(t.from_address, original->from_address);
    EXPECT_EQ(t.to_address, original->to_address);
    EXPECT_EQ(t.amount, original->amount);
    EXPECT_EQ(t.token_id, original->token_id);
    EXPECT_EQ(t.log_index, original->log_index);
    EXPECT_EQ(t.batch_index, original->batch_index);
  }
  Result<RevertedBlock> bad = ParseBlockRevertedPayload(
      R"({"block_number":1,"block_hash":"0x1","reorg_generation":1,"reverted_event_ids":[],
          "token_transfers":[{"token_address":"0x1"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("event_id"), std::string::npos) << bad.status().message();
}

TEST(ParseEnvelope, NamesTheBadField) {
  Result<Envelope> r = ParseEnvelope(R"({"event_type":"block.new","event_id":"x","timestamp":"t",
      "chain_id":"1","payload":{},"metadata":{"producer":"p","version":"1"}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidData);
  EXPECT_NE(r.status().message().find("chain_id"), std::string::npos);
  EXPECT_FALSE(ParseEnvelope("not json").ok());
}

TEST(ParseTransferPayload, RefusesANonDecimalAmount) {
  Result<TransferEvent> r = ParseTransferPayload(
      R"({"token_address":"0x1","token_standard":"erc20","from_address":"0x2","to_address":"0x3",
          "amount":"0x10","token_id":null,"transaction_hash":"0x4","log_index":1,"batch_index":0,
          "block_number":5,"block_hash":"0x6"})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("amount"), std::string::npos);
}

TEST(ProducerEvent, WrapsAnotherProducersPayloadWithAStableId) {
  Result<OutgoingEvent> e =
      ProducerEvent(5, kContractVerified, "0xabc", R"({"address":"0xabc","ok":true})", 0);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->topic, "contract.verified.5");
  EXPECT_EQ(e->event_id, EventId(5, kContractVerified, "0xabc"));
  Result<Envelope> env = ParseEnvelope(e->body);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->payload_json, R"({"chain_id":5,"address":"0xabc","ok":true})");
  EXPECT_EQ(ProducerEvent(5, "contract.deployed", "x", "{}", 0).status().code(),
            Code::kFailedPrecondition);
  Result<OutgoingEvent> bad = ProducerEvent(5, kContractVerified, "x", "[1]", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("JSON object"), std::string::npos);
}

TEST(ContractVerifiedEvent, CarriesTheSeedsPayload) {
  OutgoingEvent e = ContractVerifiedEvent(138, "0xABCD", "verified", 1704067200);
  Result<Envelope> env = ParseEnvelope(e.body);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->payload_json,
            R"({"chain_id":138,"address":"0xabcd","verification_status":"verified",)"
            R"("verified_at":"2024-01-01T00:00:00Z"})");
  EXPECT_EQ(e.event_id, ContractVerifiedEvent(138, "0xabcd", "verified", 1704067200).event_id);
}

TEST(AppendJsonString, Escapes) {
  std::string out;
  AppendJsonString(out, "a\"b\\c\n\x01");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001\"");
}

}  // namespace
}  // namespace gapless

namespace gapless {
namespace {

// A bus URL as logs and status show it: without credentials, also for a Redis bus given as a
// primary with its replica.
TEST(BusName, DropsCredentialsOfMultiServerRedisUrls) {
  EXPECT_EQ(BusName("redis://:hunter2@p:6379,r:6380/2"), "redis://***@p:6379,r:6380/2");
  EXPECT_EQ(BusName("redis://user:hunter2@p:6379"), "redis://***@p:6379");
  EXPECT_EQ(BusName("kafka://h1:9092,h2:9092?acks=all"), "kafka://h1:9092,h2:9092");
}

// metadata.phase: "backfill" for history, "live" for a block committed while following; parsed
// back, absent accepted (older producers), anything else refused.
TEST(EventPhase, IsInTheMetadataAndParsedBack) {
  const BlockData data = SyntheticBlock(100, {.transactions_per_block = 2});
  const OutgoingEvent history = BlockEvents(1, data)[0];
  const OutgoingEvent live = BlockEvents(1, data, 0, EventPhase::kLive)[0];
  EXPECT_EQ(history.event_id, live.event_id) << "the phase is not part of the identity";
  EXPECT_TRUE(history.body.ends_with(
      R"("metadata":{"producer":"gapless","version":"1.0","phase":"backfill"}})"));
  EXPECT_EQ(ParseEnvelope(history.body)->phase, "backfill");
  EXPECT_EQ(ParseEnvelope(live.body)->phase, "live");
  EXPECT_EQ(ParseEnvelope(BlockRevertedEvent(1, data, 1, 0).body)->phase, "live");
  Result<Envelope> old = ParseEnvelope(R"({"event_type":"block.new","event_id":"x",
      "timestamp":"t","chain_id":1,"payload":{},"metadata":{"producer":"p","version":"1"}})");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->phase, "");
  Result<Envelope> bad = ParseEnvelope(R"({"event_type":"block.new","event_id":"x",
      "timestamp":"t","chain_id":1,"payload":{},
      "metadata":{"producer":"p","version":"1","phase":"later"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidData);
  EXPECT_NE(bad.status().message().find("phase"), std::string::npos);
}

TEST(IsDecodedEventType, ThreeLowerCaseParts) {
  EXPECT_TRUE(IsDecodedEventType("dex.pools.swap_c42079f9"));
  EXPECT_FALSE(IsDecodedEventType("block.new"));
  EXPECT_FALSE(IsDecodedEventType("dex.pools.swap.x"));
  EXPECT_FALSE(IsDecodedEventType("dex..swap"));
  EXPECT_FALSE(IsDecodedEventType("dex.Pools.swap"));
  EXPECT_FALSE(IsDecodedEventType("dex.pools."));
}

// A decoded log's event: its id from (type, block hash with incarnation, log index), its payload
// chain_id first, the block's time; a retraction names the same id.
TEST(DecodedLogEvent, HasADeterministicIdAndIsRetractedByIt) {
  const std::string hash = "0x" + std::string(64, 'a');
  const OutgoingEvent e =
      DecodedLogEvent(7, "dex.weth.deposit", hash, 3, 1'700'000'000,
                      R"("block_number":5,"wad":"1")", 0, EventPhase::kBackfill);
  EXPECT_EQ(e.event_id, EventId(7, "dex.weth.deposit", hash + "/3"));
  EXPECT_EQ(e.event_id, DecodedEventId(7, "dex.weth.deposit", hash, 3));
  EXPECT_NE(DecodedEventId(7, "dex.weth.deposit", hash, 3, 1), e.event_id);
  EXPECT_EQ(e.topic, "dex.weth.deposit.7");
  Result<Envelope> env = ParseEnvelope(e.body);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->payload_json, R"({"chain_id":7,"block_number":5,"wad":"1"})");
  EXPECT_EQ(env->timestamp, "2023-11-14T22:13:20Z");
  BlockData orphaned;
  orphaned.block.number = 5;
  orphaned.block.hash = hash;
  Result<RevertedBlock> reverted = ParseBlockRevertedPayload(
      ParseEnvelope(BlockRevertedEvent(7, orphaned, 1, 0, 0, {{"dex.weth.deposit", 3}}).body)
          ->payload_json);
  ASSERT_TRUE(reverted.ok()) << reverted.status().ToString();
  ASSERT_EQ(reverted->reverted_event_ids.size(), 2u);
  EXPECT_EQ(reverted->reverted_event_ids[1], e.event_id);
}

}  // namespace
}  // namespace gapless
