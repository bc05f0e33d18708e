// ReadBlocks against a real PostgreSQL, as the event relay reads: kEventReadOptions leaves out
// every column no event carries, and the events built from such a read are byte for byte those
// built from a full one.
#include <gtest/gtest.h>

#include "events/event.h"
#include "store/reader.h"
#include "store/testdata.h"
#include "store/writer.h"
#include "testing/pg_test_db.h"

namespace gapless {
namespace {

using ReaderTest = PgTest;

TEST_F(ReaderTest, TheEventColumnsGiveTheEventsOfAFullRead) {
  RangeWrite w = SyntheticRange(30, 33,
                                {.transactions_per_block = 20,
                                 .logs_per_block = 30,
                                 .token_transfers_per_block = 12,
                                 .traces_per_block = 30});
  for (BlockData& d : w.blocks) {
    // Internal transfers (the synthetic children are delegate/static calls that move nothing).
    for (size_t i = 1; i < d.traces.size(); i += 6) {
      if (d.traces[i].trace_address.empty()) continue;
      d.traces[i].call_type = "call";
      d.traces[i].value = U256(1000 + i);
    }
  }
  Token token;
  token.address = w.blocks[0].token_transfers[0].token_address;
  token.block_number = 30;
  token.standard = "erc20";
  token.symbol = "GDT";
  token.decimals = 6;
  w.blocks[0].tokens.push_back(token);
  Status st = WriteRange(conn(), w);
  ASSERT_TRUE(st.ok()) << st.ToString();

  auto full = ReadBlocks(conn(), 30, 33);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  auto lean = ReadBlocks(conn(), 30, 33, kEventReadOptions);
  ASSERT_TRUE(lean.ok()) << lean.status().ToString();
  ASSERT_EQ(lean->size(), 4u);
  ASSERT_EQ(full->size(), 4u);
  size_t internal = 0, with_symbol = 0;
  for (size_t i = 0; i < 4; ++i) {
    const BlockData& l = (*lean)[i];
    // Left out: what no event carries (the transactions' input, most of their bytes, for one).
    ASSERT_EQ(l.transactions.size(), (*full)[i].transactions.size());
    EXPECT_TRUE(l.transactions[0].input.empty());
    EXPECT_FALSE((*full)[i].transactions[0].input.empty());
    EXPECT_TRUE(l.block.logs_bloom.empty());
    EXPECT_TRUE(l.logs.empty());
    std::vector<OutgoingEvent> want = BlockEvents(1, (*full)[i], 1);
    std::vector<OutgoingEvent> got = BlockEvents(1, l, 1);
    ASSERT_EQ(got.size(), want.size()) << "block " << l.block.number;
    for (size_t e = 0; e < got.size(); ++e) {
      EXPECT_EQ(got[e].topic, want[e].topic);
      EXPECT_EQ(got[e].event_id, want[e].event_id);
      EXPECT_EQ(got[e].body, want[e].body);
      if (got[e].event_type == kInternalTransfer) ++internal;
      if (got[e].body.find("\"token_symbol\":\"GDT\"") != std::string::npos) ++with_symbol;
    }
  }
  EXPECT_GT(internal, 0u);
  EXPECT_GT(with_symbol, 0u);
}

}  // namespace
}  // namespace gapless
