// datasets: what a committed range holds, by name, and what runs asked for (issue 35;
// migrations/014_datasets.sql).
//
// Every range write holds the "blocks" dataset (blocks, withdrawals, transactions with their
// receipts, logs, token transfers, the contracts of deployment transactions) and, as its run was
// asked, more: "traces" (--traces: the traces table and the contracts factories made),
// "token_metadata" (--token-metadata: the tokens table). The contracts mode adds one dataset per
// config, DecodedDataset(config id): its decoded tables. One mechanism for all of them: the
// writer records the names on the range's indexed_ranges row (store/writer.h "Datasets"), a run
// plans again every committed range that lacks a name it asks for (CommittedRanges with
// `holding`, store/queries.h), the writer writes such a range whole again with the new dataset
// (replacing its rows, so they equal a run that asked for it from the start), and `verify`
// reports the committed blocks a run asked a dataset for that lack it (MissingRequestedDatasets).
//
// A block holds a dataset when some indexed_ranges row covering it lists the name. The record
// never claims more than the rows hold; it may claim less (a range then gets written again: only
// work).
//
// Datasets is a value type (sorted, unique names); the functions take a connection and are as
// thread-safe as it is (one thread at a time).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/pg.h"

namespace gapless {

inline constexpr std::string_view kBlocksDataset = "blocks";
inline constexpr std::string_view kTracesDataset = "traces";
inline constexpr std::string_view kTokenMetadataDataset = "token_metadata";

// The dataset of the contracts mode's decoded tables of one config: "decoded:<config id>" (the
// id: letters, digits, '_', '-' or '.', e.g. a hash of the config).
std::string DecodedDataset(std::string_view config_id);

// A set of dataset names, sorted bytewise and without duplicates, so two sets are equal exactly
// when their SQL arrays are (the compaction of indexed_ranges compares them).
class Datasets {
 public:
  Datasets() = default;
  // {"blocks"}: what every range write holds.
  static Datasets Blocks();

  Datasets& Add(std::string_view name);
  bool Has(std::string_view name) const;
  // Every name of `other` is here.
  bool Contains(const Datasets& other) const;
  // The names here that `other` lacks.
  Datasets Minus(const Datasets& other) const;

  const std::vector<std::string>& names() const { return names_; }
  bool empty() const { return names_.empty(); }
  // "blocks, traces", for people; "none" when empty.
  std::string ToString() const;
  // A PostgreSQL text[] literal: {"blocks","traces"}.
  std::string SqlArray() const;
  // Parses PostgreSQL's text output of a text[] ({blocks,traces}, elements quoted where needed).
  static Result<Datasets> ParseSqlArray(std::string_view text);

  friend bool operator==(const Datasets&, const Datasets&) = default;

 private:
  std::vector<std::string> names_;
};

// Committed blocks [from, to] that lack `dataset`.
struct DatasetGap {
  std::string dataset;
  uint64_t from = 0;  // inclusive
  uint64_t to = 0;    // inclusive
  friend bool operator==(const DatasetGap&, const DatasetGap&) = default;
};

// The committed blocks of [from, to] (covered by an indexed_ranges row) that lack a dataset of
// `asked` (no row covering them lists it), as disjoint intervals per dataset, by dataset, then
// ascending. Blocks not committed are not listed (they are a gap, not a missing dataset).
Result<std::vector<DatasetGap>> RangesLacking(PgConn& conn, const Datasets& asked, uint64_t from,
                                              uint64_t to);

// The datasets that committed rows overlapping [from, to] hold and `asked` lacks. A backfill of
// those blocks (a write holding a dataset they lack) replaces their rows, so it would delete
// these: the writer refuses it, and `index` plans no such run (BackfillWouldDrop says why).
// Decoded tables' datasets are not counted: a write deletes only the decoded tables it writes.
Result<Datasets> HeldBeyond(PgConn& conn, uint64_t from, uint64_t to, const Datasets& asked);

// "blocks 0-100 hold traces, which this run does not ask for: ..." (FailedPrecondition), naming
// how to ask for them too.
Status BackfillWouldDrop(uint64_t from, uint64_t to, const Datasets& beyond);

// Records that a run asked for `asked` over [from, to] (to = UINT64_MAX or above the largest
// BIGINT: a run following the chain); "blocks" is not recorded (a missing block is verify's gap).
// A request from the same first block widens the recorded one.
Status RecordDatasetRequest(PgConn& conn, const Datasets& asked, uint64_t from, uint64_t to);

// The committed blocks of [from, to] that lack a dataset some run asked for over them
// (RecordDatasetRequest): what `verify` reports.
Result<std::vector<DatasetGap>> MissingRequestedDatasets(PgConn& conn, uint64_t from, uint64_t to);

// How a run asks for `dataset`, for messages: "--traces", "--token-metadata on", or for the
// decoded tables "its contracts config".
std::string HowToAskFor(std::string_view dataset);

// "blocks 0-100 lack traces; block 7 lacks token_metadata" for people: at most `max_listed`
// intervals.
std::string DescribeGaps(const std::vector<DatasetGap>& gaps, size_t max_listed = 5);

}  // namespace gapless
