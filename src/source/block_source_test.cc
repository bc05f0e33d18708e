// The block-source seam: every source's blocks go through one decoder with one set of checks.
// Mainnet block 17000000 (../shared/fixtures) is served by a JSON-RPC node (a ReplayTransport
// behind a real local HTTP server) and carried in a Kafka message; both decode to the same rows,
// and the same inconsistencies (receipts of another fork, a wrong block) are caught for both.
#include "source/block_source.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "rpc/curl_transport.h"
#include "source/block_message.h"
#include "testing/http_test_server.h"
#include "testing/replay_transport.h"

namespace gapless {
namespace {

RawBlock Raw(uint64_t number, std::string block_json, std::string receipts_json) {
  RawBlock b;
  b.number = number;
  b.block_json = std::move(block_json);
  b.receipts_json = std::move(receipts_json);
  return b;
}

constexpr uint64_t kBlock = 17000000;
constexpr char kHash[] = "0x96cfa0fb5e50b0a3f6cc76f3299cfbf48f17e8b41798d1394474e67ec8a97e9f";

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(GAPLESS_FIXTURES_DIR) + "/mainnet/17000000/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

RawBlock MainnetBlock() {
  return Raw(kBlock, ReadFixture("block.json"), ReadFixture("receipts.json"));
}

// For the "names the block and field" requirement only: what an error *is* is asserted on its
// code and reason().
bool Contains(const Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

// A node serving the fixture block at 17000000 with `receipts` as its receipts.
struct Node {
  explicit Node(const std::string& block, const std::string& receipts)
      : server(HttpTestServer::ForwardTo(&replay)) {
    EXPECT_TRUE(replay.Add("eth_getBlockByNumber", R"(["0x1036640",true])", block).ok());
    EXPECT_TRUE(replay.Add("eth_getBlockReceipts", R"(["0x1036640"])", receipts).ok());
    source = std::make_unique<RpcBlockSource>(
        std::make_unique<JsonRpcClient>(std::make_unique<CurlTransport>(server.url())));
  }
  ReplayTransport replay;
  HttpTestServer server;
  std::unique_ptr<RpcBlockSource> source;
};

Result<BlockData> FetchOne(BlockSource& source, BlockChecks checks = {std::optional<uint64_t>(1)}) {
  GAPLESS_ASSIGN_OR_RETURN(std::vector<RawBlock> raw, source.Fetch(kBlock, 1));
  if (raw.size() != 1) return Internal("expected one block");
  return DecodeRawBlock(raw[0], checks, source.Describe());
}

TEST(BlockSourceTest, RpcAndKafkaMessageDecodeToTheSameRows) {
  Node node(ReadFixture("block.json"), ReadFixture("receipts.json"));
  Result<BlockData> from_rpc = FetchOne(*node.source);
  ASSERT_TRUE(from_rpc.ok()) << from_rpc.status().ToString();

  Result<std::string> message = EncodeBlockMessage(MainnetBlock());
  ASSERT_TRUE(message.ok()) << message.status().ToString();
  Result<RawBlock> parsed = ParseBlockMessage(*message, "17000000", "blocks[2]@41");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->number, kBlock);
  HeldBlockSource held("kafka topic blocks");
  held.Put(std::move(parsed).value());
  Result<BlockData> from_kafka = FetchOne(held);
  ASSERT_TRUE(from_kafka.ok()) << from_kafka.status().ToString();

  EXPECT_EQ(from_kafka->block.hash, kHash);
  EXPECT_EQ(from_kafka->block, from_rpc->block);
  EXPECT_EQ(from_kafka->transactions, from_rpc->transactions);
  EXPECT_EQ(from_kafka->logs, from_rpc->logs);
  EXPECT_EQ(from_kafka->token_transfers, from_rpc->token_transfers);
  EXPECT_EQ(from_kafka->transactions.size(), 102u);
  EXPECT_EQ(from_kafka->logs.size(), 237u);
}

// Receipts from the other side of a re-org (another block hash): the decoder refuses them, for
// the node's answer and for a message alike, naming the block.
TEST(BlockSourceTest, ReceiptsOfAnotherForkAreRefusedForEverySource) {
  std::string other_fork = ReadFixture("receipts.json");
  size_t at = 0;
  const std::string other = "0x" + std::string(64, 'e');
  while ((at = other_fork.find(kHash, at)) != std::string::npos) other_fork.replace(at, 66, other);

  Node node(ReadFixture("block.json"), other_fork);
  Result<BlockData> from_rpc = FetchOne(*node.source);
  ASSERT_FALSE(from_rpc.ok());
  EXPECT_EQ(from_rpc.status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains(from_rpc.status(), "block 17000000")) << from_rpc.status().message();
  EXPECT_TRUE(Contains(from_rpc.status(), "blockHash")) << from_rpc.status().message();

  RawBlock forked = MainnetBlock();
  forked.receipts_json = other_fork;
  Result<RawBlock> parsed = ParseBlockMessage(*EncodeBlockMessage(forked), "17000000", "m");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  HeldBlockSource held("kafka");
  held.Put(std::move(parsed).value());
  Result<BlockData> from_kafka = FetchOne(held);
  ASSERT_FALSE(from_kafka.ok());
  EXPECT_EQ(from_kafka.status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains(from_kafka.status(), "block 17000000")) << from_kafka.status().message();
  EXPECT_TRUE(Contains(from_kafka.status(), "blockHash")) << from_kafka.status().message();
}

TEST(BlockSourceTest, ADroppedReceiptAndAWrongBlockAreRefused) {
  // One receipt fewer than transactions.
  std::string receipts = ReadFixture("receipts.json");
  size_t last = receipts.rfind("{\n  \"blockHash\"");
  ASSERT_NE(last, std::string::npos);
  std::string dropped = receipts.substr(0, last);
  dropped.erase(dropped.find_last_of(','));
  dropped += "]";
  Node short_node(ReadFixture("block.json"), dropped);
  Result<BlockData> r = FetchOne(*short_node.source);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains(r.status(), "101")) << r.status().message();

  // The node answers another block than the one asked for.
  RawBlock wrong = MainnetBlock();
  wrong.number = kBlock + 1;
  r = DecodeRawBlock(wrong, std::optional<uint64_t>(1), "test");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains(r.status(), "17000000")) << r.status().message();
}

// --verify in the one decoding path: a log byte changed in transit decodes fine (every reference
// still agrees) but does not prove against the header's receiptsRoot; for every source.
TEST(BlockSourceTest, VerifyRefusesABlockWhoseLogsDoNotProveAgainstItsHeader) {
  std::string receipts = ReadFixture("receipts.json");
  size_t data = receipts.find("\"data\": \"0x");
  ASSERT_NE(data, std::string::npos);
  size_t digit = data + 12;
  receipts[digit] = receipts[digit] == '0' ? '1' : '0';
  Node node(ReadFixture("block.json"), receipts);
  EXPECT_TRUE(FetchOne(*node.source).ok()) << "without --verify the decoder cannot tell";
  BlockChecks checks(std::optional<uint64_t>(1), VerifyOptions{});
  Result<BlockData> verified = FetchOne(*node.source, checks);
  ASSERT_FALSE(verified.ok());
  EXPECT_EQ(verified.status().code(), Code::kInvalidData);
  EXPECT_EQ(verified.status().reason(), kVerifyMismatchReason) << verified.status().ToString();
  EXPECT_TRUE(Contains(verified.status(), "block 17000000")) << verified.status().message();
  EXPECT_TRUE(Contains(verified.status(), "receiptsRoot")) << verified.status().message();

  RawBlock changed = MainnetBlock();
  changed.receipts_json = receipts;
  HeldBlockSource held("kafka");
  held.Put(*ParseBlockMessage(*EncodeBlockMessage(changed), "17000000", "m"));
  verified = FetchOne(held, checks);
  ASSERT_FALSE(verified.ok());
  EXPECT_EQ(verified.status().reason(), kVerifyMismatchReason) << verified.status().ToString();
  EXPECT_TRUE(Contains(verified.status(), "receiptsRoot")) << verified.status().message();
  // The untouched block proves, senders included.
  Node good(ReadFixture("block.json"), ReadFixture("receipts.json"));
  VerifyOptions senders;
  senders.recover_senders = true;
  Result<BlockData> ok = FetchOne(*good.source, BlockChecks(std::optional<uint64_t>(1), senders));
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(BlockMessageTest, EnvelopeErrorsNameTheBlockOrTheMessage) {
  std::string message = *EncodeBlockMessage(MainnetBlock());
  Result<RawBlock> r = ParseBlockMessage(message, "17000001", "blocks[0]@7");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidData);
  EXPECT_TRUE(Contains(r.status(), "key says block 17000001")) << r.status().message();

  r = ParseBlockMessage(message, "17x", "blocks[0]@7");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "blocks[0]@7")) << r.status().message();

  r = ParseBlockMessage(ReadFixture("block.json"), "17000000", "blocks[0]@8");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "no \"receipts\"")) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "block 17000000")) << r.status().message();

  r = ParseBlockMessage("[1,2]", "", "blocks[1]@9");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status(), "blocks[1]@9")) << r.status().message();
  EXPECT_TRUE(Contains(r.status(), "not a JSON object")) << r.status().message();

  // An empty block object still gets a well-formed message.
  Result<std::string> empty = EncodeBlockMessage(Raw(1, "{ }", "[]"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "{ \"receipts\":[]}");
}

// Blocks in hand are served from memory; the runs not held come from the fallback source (the
// Kafka worker's --rpc), in one call per run.
TEST(HeldBlockSourceTest, MissingRunsComeFromTheFallbackOrAreNotFound) {
  struct Counting : BlockSource {
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    Result<std::vector<RawBlock>> Fetch(uint64_t first, uint64_t count) override {
      calls.emplace_back(first, count);
      std::vector<RawBlock> out;
      for (uint64_t n = first; n < first + count; ++n) out.push_back(Raw(n, "rpc", "[]"));
      return out;
    }
    std::string Describe() const override { return "rpc"; }
  } rpc;
  HeldBlockSource held("kafka", &rpc);
  for (uint64_t n : {10, 11, 14, 17}) held.Put(Raw(n, "kafka", "[]"));
  Result<std::vector<RawBlock>> blocks = held.Fetch(10, 9);  // 10..18
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 9u);
  std::string from;
  for (size_t i = 0; i < blocks->size(); ++i) {
    EXPECT_EQ((*blocks)[i].number, 10 + i);
    from += (*blocks)[i].block_json == "kafka" ? 'k' : 'r';
  }
  EXPECT_EQ(from, "kkrrkrrkr");
  EXPECT_EQ(rpc.calls, (std::vector<std::pair<uint64_t, uint64_t>>{{12, 2}, {15, 2}, {18, 1}}));

  HeldBlockSource alone("kafka topic blocks");
  alone.Put(Raw(10, "kafka", "[]"));
  Result<std::vector<RawBlock>> missing = alone.Fetch(10, 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_TRUE(Contains(missing.status(), "block 11")) << missing.status().message();
}

// What the Kafka worker's memory budget counts: the text of every block held, a replaced block
// counted once, a dropped one not at all.
TEST(HeldBlockSourceTest, BytesCountTheTextHeld) {
  HeldBlockSource held("kafka");
  EXPECT_EQ(held.bytes(), 0u);
  held.Put(Raw(10, "0123456789", "[]"));
  held.Put(Raw(11, "01234", "[1,2]"));
  EXPECT_EQ(held.bytes(), 12u + 10u);
  held.Put(Raw(10, "0123", "[]"));  // a second message for block 10 replaces the first
  EXPECT_EQ(held.bytes(), 6u + 10u);
  held.Drop(11);
  held.Drop(12);  // not held: nothing changes
  EXPECT_EQ(held.bytes(), 6u);
  held.Drop(10);
  EXPECT_EQ(held.bytes(), 0u);
  EXPECT_EQ(held.size(), 0u);
}

}  // namespace
}  // namespace gapless
