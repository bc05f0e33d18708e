// Decoding stored logs (store/decoded.h "Decoding stored logs") against a real PostgreSQL: a
// committed range lacking only a config's table is read back and decoded without touching the data
// tables, and a decode-only write whose range was written again since it was read (a re-org's
// other fork) is refused, writing nothing.
#include <gtest/gtest.h>

#include "abi/config.h"
#include "store/decoded.h"
#include "store/partitions.h"
#include "store/testdata.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

const char* kTokenAbi = R"([
  {"type":"event","name":"Transfer","anonymous":false,"inputs":[
    {"indexed":true,"name":"from","type":"address"},
    {"indexed":true,"name":"to","type":"address"},
    {"indexed":false,"name":"value","type":"uint256"}]}
])";
const char* kTransferTopic = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
const char* kToken = "0x7777777777777777777777777777777777777777";

// Synthetic blocks whose log 0 of blocks 2 and 6 is a Transfer of the token.
RangeWrite TokenRange(uint64_t seed) {
  SyntheticOptions options = SmallSyntheticOptions();
  options.seed = seed;
  RangeWrite w = SyntheticRange(0, 9, options);
  for (uint64_t n : {2, 6}) {
    Log& log = w.blocks[n].logs.at(0);
    log.address = kToken;
    log.topics = {kTransferTopic, "0x" + std::string(24, '0') + std::string(40, '1'),
                  "0x" + std::string(24, '0') + std::string(40, '2')};
    log.data = "0x" + std::string(63, '0') + std::to_string(n);
  }
  return w;
}

class DecodedStoredTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string yaml = std::string(
                                 "name: dex\ncontracts:\n  - name: token\n    abi: t.json\n"
                                 "    address: \"") +
                             kToken + "\"\n";
    auto config = abi::ParseContractsConfig(
        yaml, "dex.yaml",
        [](const std::string&) -> Result<std::string> { return std::string(kTokenAbi); });
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto tables = ContractTables::Make(*config);
    ASSERT_TRUE(tables.ok()) << tables.status().ToString();
    tables_ = std::make_unique<ContractTables>(std::move(*tables));
    ASSERT_TRUE(ApplyContractTables(conn(), *tables_).ok());
    ASSERT_TRUE(EnsurePartitions(conn(), 0, 100).ok());
    // Committed before the config existed: the range lacks the table's dataset.
    Status st = WriteRange(conn(), TokenRange(1), WriteOptions{});
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  std::string One(const std::string& sql) {
    auto r = conn().Query(sql);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && r->rows() > 0 ? std::string(r->Get(0, 0)) : "";
  }

  Datasets Asked() const {
    Datasets asked = Datasets::Blocks();
    for (const std::string& d : tables_->datasets().names()) asked.Add(d);
    return asked;
  }

  WriteOptions WithTables() const {
    WriteOptions o;
    o.contracts = tables_.get();
    return o;
  }

  std::unique_ptr<ContractTables> tables_;
};

TEST_F(DecodedStoredTest, ARangeLackingOnlyTheTableIsDecodedFromItsStoredLogsAlone) {
  const std::string versions =
      "SELECT string_agg(xmin::text || ctid::text, ',' ORDER BY number) "
      "FROM blocks";
  const std::string before = One(versions);
  RangeWrite w;
  w.from_block = 0;
  w.to_block = 9;
  auto read = ReadStoredForDecoding(conn(), *tables_, Asked(), &w);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_TRUE(*read) << "the range lacks only the table: decodable from the stored logs";
  Status st = WriteRange(conn(), w, WithTables());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(One("SELECT string_agg(block_number || ':' || value, ',' ORDER BY block_number) FROM "
                "dex.token_transfer"),
            "2:2,6:6");
  EXPECT_EQ(One(versions), before) << "the blocks were written again";
  auto held = DatasetsHeldThroughout(conn(), 0, 9);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->Contains(Asked())) << held->ToString();

  // Nothing left to decode: the range is fetched only if something else is asked.
  RangeWrite again;
  again.from_block = 0;
  again.to_block = 9;
  auto second = ReadStoredForDecoding(conn(), *tables_, Asked(), &again);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(*second);
  Datasets more = Asked();
  more.Add(kTracesDataset);
  auto traces = ReadStoredForDecoding(conn(), *tables_, more, &again);
  ASSERT_TRUE(traces.ok());
  EXPECT_FALSE(*traces) << "traces cannot come from the stored logs";
}

TEST_F(DecodedStoredTest, ADecodeOnlyWriteOfARangeWrittenAgainSinceItWasReadIsRefused) {
  RangeWrite w;
  w.from_block = 0;
  w.to_block = 9;
  auto read = ReadStoredForDecoding(conn(), *tables_, Asked(), &w);
  ASSERT_TRUE(read.ok() && *read);
  // Meanwhile the chain re-orged and the range was written again from the other fork.
  WriteOptions replace;
  replace.mode = WriteMode::kReplaceRange;
  Status st = WriteRange(conn(), TokenRange(2), replace);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = WriteRange(conn(), w, WithTables());
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_EQ(st.reason(), kStoredRangeChangedReason) << st.ToString();
  EXPECT_EQ(One("SELECT count(*) FROM dex.token_transfer"), "0") << "rows of the old fork";
  // Read again, it decodes the new fork's logs.
  RangeWrite fresh;
  fresh.from_block = 0;
  fresh.to_block = 9;
  read = ReadStoredForDecoding(conn(), *tables_, Asked(), &fresh);
  ASSERT_TRUE(read.ok() && *read);
  st = WriteRange(conn(), fresh, WithTables());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(One("SELECT count(*) FROM dex.token_transfer t JOIN blocks b ON b.number = "
                "t.block_number AND b.hash = t.block_hash"),
            "2");
}

}  // namespace
}  // namespace gapless
