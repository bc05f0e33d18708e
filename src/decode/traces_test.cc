// DecodeParityTraces and DecodeGethTraces against ethereum-etl's recorded answers and expected
// trace CSVs (../shared/fixtures/ethereum-etl, TRACES.md): every row and every cell, compared as
// multisets of lines as ethereum-etl's own tests do. Then the errors: what is wrong is named.
#include "decode/traces.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "decode/decode_test_util.h"

namespace gapless {
namespace {

using testing::Fixture;
using testing::ReadCsv;
using testing::ReadFile;
using testing::ResultOf;

constexpr const char* kDir = "ethereum-etl/tests/resources/";

// A trace's cells in ethereum-etl's trace CSV (None = empty cell).
std::map<std::string, std::string> TraceCells(const Trace& t) {
  auto opt = [](const std::optional<std::string>& s) { return s.value_or(""); };
  auto num = [](const auto& n) { return n.has_value() ? std::to_string(*n) : std::string(); };
  std::string address;
  for (size_t i = 0; i < t.trace_address.size(); ++i) {
    address += (i > 0 ? "," : "") + std::to_string(t.trace_address[i]);
  }
  return {{"block_number", std::to_string(t.block_number)},
          {"transaction_hash", opt(t.transaction_hash)},
          {"transaction_index", num(t.transaction_index)},
          {"from_address", opt(t.from_address)},
          {"to_address", opt(t.to_address)},
          {"value", t.value.has_value() ? t.value->ToDecimal() : ""},
          {"input", opt(t.input)},
          {"output", opt(t.output)},
          {"trace_type", t.trace_type},
          {"call_type", opt(t.call_type)},
          {"reward_type", opt(t.reward_type)},
          {"gas", num(t.gas)},
          {"gas_used", num(t.gas_used)},
          {"subtraces", std::to_string(t.subtraces)},
          {"trace_address", address},
          {"error", opt(t.error)},
          {"status", num(t.status)},
          {"trace_id", opt(t.trace_id)}};
}

std::string Line(const std::map<std::string, std::string>& cells) {
  std::string out;
  for (const auto& [k, v] : cells) out += k + "=" + v + "|";
  return out;
}

// Expected rows equal decoded rows, as multisets; every column of the CSV is checked.
void ExpectSameRows(const std::string& csv_path, const std::vector<Trace>& traces) {
  testing::Csv csv = ReadCsv(csv_path);
  std::vector<std::string> expected, actual;
  for (const auto& row : csv.rows) expected.push_back(Line(row));
  for (const Trace& t : traces) {
    std::map<std::string, std::string> cells = TraceCells(t);
    // Only the CSV's columns (all of them: an empty file has none and no rows).
    std::map<std::string, std::string> kept;
    for (const std::string& column : csv.header) {
      ASSERT_TRUE(cells.count(column)) << "unknown column " << column;
      kept[column] = cells[column];
    }
    actual.push_back(Line(kept));
  }
  if (csv.header.empty()) {
    EXPECT_TRUE(traces.empty()) << csv_path << ": expected no rows";
    return;
  }
  EXPECT_EQ(csv.header.size(), 18u) << csv_path;
  std::sort(expected.begin(), expected.end());
  std::sort(actual.begin(), actual.end());
  EXPECT_EQ(actual, expected) << csv_path;
}

struct Case {
  const char* folder;
  uint64_t block;
  const char* hex;
};
constexpr Case kCases[] = {{"block_without_transactions", 0, "0x0"},
                           {"block_with_create", 1000690, "0xf44f2"},
                           {"block_with_suicide", 1011973, "0xf7105"},
                           {"block_with_subtraces", 1000000, "0xf4240"},
                           {"block_with_error", 1000895, "0xf45bf"}};

TEST(TracesTest, ParityTraceBlockGivesEthereumEtlsRows) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.folder);
    const std::string dir = Fixture(std::string(kDir) + "test_export_traces_job/" + c.folder);
    const std::string answer =
        ReadFile(dir + "/web3_response.trace_block_" + std::string(c.hex) + ".json");
    auto traces = DecodeParityTraces(ResultOf(answer), c.block);
    ASSERT_TRUE(traces.ok()) << traces.status().ToString();
    ExpectSameRows(dir + "/expected_traces.csv", *traces);
  }
}

TEST(TracesTest, GethCallTracerGivesEthereumEtlsRows) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.folder);
    // ethereum-etl's geth case for the empty block is block 1 (TRACES.md).
    const uint64_t block = c.block == 0 ? 1 : c.block;
    const std::string hex = c.block == 0 ? "0x1" : c.hex;
    const std::string dir = Fixture(std::string(kDir) + "test_extract_geth_traces_job/" + c.folder);
    const std::string answer = ReadFile(dir + "/web3_response.debug_traceBlockByNumber_" + hex +
                                        "_tracer_calltracer.json");
    auto traces = DecodeGethTraces(ResultOf(answer), block);
    ASSERT_TRUE(traces.ok()) << traces.status().ToString();
    ExpectSameRows(dir + "/expected_traces.csv", *traces);
  }
}

// With the block's transaction hashes, the geth path fills what the Parity path has: the hash,
// status (a failure spreads to the children) and trace_id.
TEST(TracesTest, GethTracesWithTheBlocksHashesGetStatusAndIds) {
  const std::string json = R"([
    {"txHash": "0x1111111111111111111111111111111111111111111111111111111111111111",
     "result": {"type": "CALL", "from": "0xAA00000000000000000000000000000000000001",
                "to": "0xbb00000000000000000000000000000000000002", "value": "0x10",
                "gas": "0x5208", "gasUsed": "0x5208", "input": "0x", "error": "execution reverted",
                "calls": [{"type": "DELEGATECALL", "from": "0xbb00000000000000000000000000000000000002",
                           "to": "0xcc00000000000000000000000000000000000003", "gas": "0x1",
                           "gasUsed": "0x1", "input": "0xabcd", "output": "0x"},
                          {"type": "CREATE2", "from": "0xbb00000000000000000000000000000000000002",
                           "to": "0xdd00000000000000000000000000000000000004", "value": "0x0",
                           "gas": "0x2", "gasUsed": "0x2", "input": "0x60", "output": "0x60",
                           "calls": [{"type": "SELFDESTRUCT",
                                      "from": "0xdd00000000000000000000000000000000000004",
                                      "to": "0xee00000000000000000000000000000000000005",
                                      "value": "0x3"}]}]}},
    {"result": {"type": "CALL", "from": "0xaa00000000000000000000000000000000000001",
                "to": "0xbb00000000000000000000000000000000000002", "value": "0x0",
                "gas": "0x5208", "gasUsed": "0x5208", "input": "0x", "output": "0x"}}])";
  const std::vector<std::string> hashes = {
      "0x1111111111111111111111111111111111111111111111111111111111111111",
      "0x2222222222222222222222222222222222222222222222222222222222222222"};
  auto traces = DecodeGethTraces(json, 7, hashes);
  ASSERT_TRUE(traces.ok()) << traces.status().ToString();
  ASSERT_EQ(traces->size(), 5u);
  const Trace& top = (*traces)[0];
  EXPECT_EQ(top.from_address, "0xaa00000000000000000000000000000000000001");  // lower-cased
  EXPECT_EQ(top.subtraces, 2u);
  EXPECT_EQ(top.status, 0);
  EXPECT_EQ(top.trace_id, "call_" + hashes[0] + "_");
  const Trace& delegate = (*traces)[1];
  EXPECT_EQ(delegate.trace_type, "call");
  EXPECT_EQ(delegate.call_type, "delegatecall");
  EXPECT_FALSE(delegate.value.has_value());
  EXPECT_EQ(delegate.status, 0) << "a reverted parent fails its children";
  EXPECT_EQ(delegate.trace_id, "call_" + hashes[0] + "_0");
  const Trace& create2 = (*traces)[2];
  EXPECT_EQ(create2.trace_type, "create2");
  EXPECT_EQ(create2.trace_address, (std::vector<uint32_t>{1}));
  const Trace& destruct = (*traces)[3];
  EXPECT_EQ(destruct.trace_type, "suicide");
  EXPECT_EQ(destruct.trace_id, "suicide_" + hashes[0] + "_1_0");
  EXPECT_EQ(destruct.value, U256(3));
  EXPECT_EQ(destruct.status, 0);
  const Trace& second = (*traces)[4];
  EXPECT_EQ(second.transaction_index, 1u);
  EXPECT_EQ(second.transaction_hash, hashes[1]);
  EXPECT_EQ(second.status, 1);

  // One hash too few; an entry whose txHash is another transaction's.
  auto short_list = DecodeGethTraces(json, 7, {hashes[0]});
  ASSERT_FALSE(short_list.ok());
  EXPECT_NE(short_list.status().message().find("2 traces for 1 transactions"), std::string::npos)
      << short_list.status().ToString();
  auto swapped = DecodeGethTraces(json, 7, {hashes[1], hashes[0]});
  ASSERT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.status().code(), Code::kInvalidData);
  EXPECT_NE(swapped.status().message().find("txHash"), std::string::npos)
      << swapped.status().ToString();
}

// Bad answers are InvalidData naming the block, the trace and the field; null is NotFound.
TEST(TracesTest, BadAnswersNameWhatIsWrong) {
  const std::string call =
      R"({"action": {"callType": "call", "from": "0x00000000000000000000000000000000000000aa",
          "gas": "0x1", "input": "0x", "to": "0x00000000000000000000000000000000000000bb",
          "value": VALUE}, "blockNumber": BLOCK, "result": {"gasUsed": "0x1", "output": "0x"},
          "subtraces": 0, "traceAddress": ADDRESS, "transactionHash":
          "0x1111111111111111111111111111111111111111111111111111111111111111",
          "transactionPosition": 0, "type": "call"})";
  auto make = [&](const std::string& value, const std::string& block, const std::string& address) {
    std::string t = call;
    t.replace(t.find("VALUE"), 5, value);
    t.replace(t.find("BLOCK"), 5, block);
    t.replace(t.find("ADDRESS"), 7, address);
    return t;
  };
  struct Bad {
    std::string json, expect;
  };
  for (const Bad& b : {Bad{"[" + make("\"0xzz\"", "5", "[]") + "]", "value"},
                       Bad{"[" + make("\"0x1\"", "6", "[]") + "]", "a trace of block 6"},
                       Bad{"[" + make("\"0x1\"", "5", "[0]") + "]", "has no parent []"},
                       Bad{"{}", "not an array"}, Bad{"[1]", "trace 0"}}) {
    auto r = DecodeParityTraces(b.json, 5);
    ASSERT_FALSE(r.ok()) << b.json;
    EXPECT_EQ(r.status().code(), Code::kInvalidData) << r.status().ToString();
    EXPECT_NE(r.status().message().find("block 5"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(b.expect), std::string::npos) << r.status().ToString();
  }
  auto null = DecodeParityTraces("null", 5);
  EXPECT_EQ(null.status().code(), Code::kNotFound);
  auto untraced = DecodeGethTraces(R"([{"error": "execution timeout"}])", 9);
  ASSERT_FALSE(untraced.ok());
  EXPECT_NE(untraced.status().message().find("execution timeout"), std::string::npos)
      << untraced.status().ToString();
  auto bad_frame = DecodeGethTraces(
      R"([{"result": {"type": "CALL", "calls": [{"type": "CALL", "gas": "0xnothex"}]}}])", 9);
  ASSERT_FALSE(bad_frame.ok());
  EXPECT_NE(bad_frame.status().message().find("frame [0]"), std::string::npos)
      << bad_frame.status().ToString();
  EXPECT_NE(bad_frame.status().message().find("gas"), std::string::npos)
      << bad_frame.status().ToString();
}

// Issue 35 item 3: trace_block asked by number can answer another fork's block at that height,
// whose top-level frames match the block's transactions. Every trace states its blockHash: one
// that is not the block's is refused, naming both hashes; a trace without one (older nodes) and a
// caller without the hash (empty) are not checked.
TEST(TracesTest, ATraceOfAnotherForksBlockIsRefusedByItsHash) {
  const std::string ours = "0x" + std::string(64, 'a');
  const std::string other = "0x" + std::string(64, 'b');
  auto trace = [](const std::string& hash_field) {
    return R"([{"action": {"callType": "call", "from": "0x00000000000000000000000000000000000000aa",
        "gas": "0x1", "input": "0x", "to": "0x00000000000000000000000000000000000000bb",
        "value": "0x1"}, )" +
           hash_field + R"("blockNumber": 5, "result": {"gasUsed": "0x1", "output": "0x"},
        "subtraces": 0, "traceAddress": [], "transactionHash":
        "0x1111111111111111111111111111111111111111111111111111111111111111",
        "transactionPosition": 0, "type": "call"}])";
  };
  auto refused = DecodeParityTraces(trace(R"("blockHash": ")" + other + R"(", )"), 5, ours);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidData) << refused.status().ToString();
  for (const std::string& part : {std::string("block 5"), std::string("blockHash"), other, ours}) {
    EXPECT_NE(refused.status().message().find(part), std::string::npos)
        << part << " not in " << refused.status().ToString();
  }
  // The same hash in upper case is the same block.
  std::string upper = ours;
  std::transform(upper.begin() + 2, upper.end(), upper.begin() + 2, ::toupper);
  EXPECT_TRUE(DecodeParityTraces(trace(R"("blockHash": ")" + upper + R"(", )"), 5, ours).ok());
  EXPECT_TRUE(DecodeParityTraces(trace(R"("blockHash": ")" + ours + R"(", )"), 5, ours).ok());
  EXPECT_TRUE(DecodeParityTraces(trace(""), 5, ours).ok());
  EXPECT_TRUE(DecodeParityTraces(trace(R"("blockHash": ")" + other + R"(", )"), 5).ok());
  auto malformed = DecodeParityTraces(trace(R"("blockHash": "0x12", )"), 5, ours);
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("blockHash"), std::string::npos)
      << malformed.status().ToString();
}

// Traces that disagree with their block are refused before anything is written: each field of
// a top-level trace, a missing or doubled one, a trace of a transaction the block lacks.
TEST(TracesTest, TracesThatDisagreeWithTheBlockAreRefused) {
  BlockData d;
  d.block.number = 12;
  Transaction call;
  call.hash = "0x" + std::string(64, 'a');
  call.transaction_index = 0;
  call.from_address = "0x" + std::string(40, '1');
  call.to_address = "0x" + std::string(40, '2');
  call.value = U256(5);
  call.input = "0xabcd";
  call.status = 1;
  Transaction create = call;
  create.hash = "0x" + std::string(64, 'b');
  create.transaction_index = 1;
  create.to_address.reset();
  create.contract_address = "0x" + std::string(40, '3');
  create.input = "0x6060";
  create.status = 0;
  d.transactions = {call, create};
  auto top = [](const Transaction& tx, const std::string& type) {
    Trace t;
    t.block_number = 12;
    t.transaction_hash = tx.hash;
    t.transaction_index = tx.transaction_index;
    t.from_address = tx.from_address;
    t.to_address = tx.to_address.has_value() ? tx.to_address : tx.contract_address;
    t.value = tx.value;
    t.input = tx.input;
    t.trace_type = type;
    if (tx.status == 0) t.error = "Reverted";
    return t;
  };
  d.traces = {top(call, "call"), top(create, "create")};
  ASSERT_TRUE(CheckTracesAgainstBlock(d).ok()) << CheckTracesAgainstBlock(d).ToString();
  struct Bad {
    std::function<void(BlockData&)> change;
    std::string expect;
  };
  for (const Bad& b : std::vector<Bad>{
           {[](BlockData& x) { x.traces[0].from_address = "0x" + std::string(40, '9'); }, "from"},
           {[](BlockData& x) { x.traces[0].to_address = "0x" + std::string(40, '9'); }, "to"},
           {[](BlockData& x) { x.traces[0].value = U256(6); }, "value"},
           {[](BlockData& x) { x.traces[0].input = "0x"; }, "input"},
           {[](BlockData& x) { x.traces[0].error = "out of gas"; }, "outcome"},
           {[](BlockData& x) { x.traces[1].error.reset(); }, "outcome"},
           {[](BlockData& x) { x.traces[1].trace_type = "call"; }, "type"},
           {[](BlockData& x) { x.traces.pop_back(); }, "no top-level trace"},
           {[](BlockData& x) { x.traces.push_back(x.traces[0]); }, "two top-level traces"},
           {[](BlockData& x) { x.traces[1].transaction_hash = "0x" + std::string(64, 'c'); },
            "no top-level trace"}}) {
    BlockData x = d;
    b.change(x);
    Status st = CheckTracesAgainstBlock(x);
    ASSERT_FALSE(st.ok()) << b.expect;
    EXPECT_EQ(st.code(), Code::kInvalidData);
    EXPECT_NE(st.message().find(b.expect), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("block 12"), std::string::npos) << st.ToString();
  }
  // A trace of a transaction the block does not hold.
  BlockData foreign = d;
  foreign.traces.push_back(top(call, "call"));
  foreign.traces.back().transaction_hash = "0x" + std::string(64, 'd');
  Status st = CheckTracesAgainstBlock(foreign);
  EXPECT_NE(st.message().find("does not hold"), std::string::npos) << st.ToString();
  // Children and rewards are not checked against transactions.
  BlockData deeper = d;
  Trace child = top(call, "call");
  child.trace_address = {0};
  child.from_address = "0x" + std::string(40, '7');
  Trace reward;
  reward.trace_type = "reward";
  deeper.traces.push_back(child);
  deeper.traces.push_back(reward);
  EXPECT_TRUE(CheckTracesAgainstBlock(deeper).ok());
}

}  // namespace
}  // namespace gapless
