// Datasets, the value type of indexed_ranges.datasets: sorted and unique whatever the order names
// are added in (rows compare equal exactly when their arrays do), and the SQL array round-trips,
// the contracts mode's "decoded:<config id>" included.
#include "store/datasets.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

TEST(Datasets, SortedAndUniqueWhateverTheOrder) {
  Datasets a;
  a.Add(kTracesDataset).Add(kBlocksDataset).Add(kTracesDataset);
  Datasets b = Datasets::Blocks();
  b.Add(kTracesDataset);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.SqlArray(), R"({"blocks","traces"})");
  EXPECT_EQ(a.ToString(), "blocks, traces");
  EXPECT_EQ(Datasets().ToString(), "none");
}

TEST(Datasets, ContainsAndMinus) {
  Datasets all = Datasets::Blocks();
  all.Add(kTracesDataset).Add(kTokenMetadataDataset).Add(DecodedDataset("a1b2"));
  EXPECT_TRUE(all.Contains(Datasets::Blocks()));
  EXPECT_FALSE(Datasets::Blocks().Contains(all));
  EXPECT_TRUE(all.Has("decoded:a1b2"));
  Datasets rest = all.Minus(Datasets::Blocks());
  EXPECT_EQ(rest.ToString(), "decoded:a1b2, token_metadata, traces");
}

TEST(Datasets, TheSqlArrayRoundTrips) {
  Datasets all = Datasets::Blocks();
  all.Add(kTracesDataset).Add(DecodedDataset("cfg-1.x"));
  auto back = Datasets::ParseSqlArray(all.SqlArray());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, all);
  // PostgreSQL's own output: unquoted where it can, quoted where it must.
  auto pg = Datasets::ParseSqlArray(R"({blocks,"odd,name",traces})");
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  EXPECT_TRUE(pg->Has("odd,name"));
  EXPECT_EQ(pg->names().size(), 3u);
  auto empty = Datasets::ParseSqlArray("{}");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(Datasets::ParseSqlArray("blocks").ok());
  EXPECT_FALSE(Datasets::ParseSqlArray(R"({"blocks})").ok());
}

TEST(Datasets, GapsAreDescribedForPeople) {
  std::vector<DatasetGap> gaps = {{"traces", 0, 100}, {"token_metadata", 7, 7}};
  EXPECT_EQ(DescribeGaps(gaps), "blocks 0-100 lack traces; block 7 lacks token_metadata");
  EXPECT_EQ(DescribeGaps(gaps, 1), "blocks 0-100 lack traces; and 1 more");
  EXPECT_EQ(HowToAskFor("traces"), "--traces");
  EXPECT_EQ(HowToAskFor(DecodedDataset("x")), "its contracts config");
}

}  // namespace
}  // namespace gapless
