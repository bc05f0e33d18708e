// decoded: the contracts mode's typed tables in PostgreSQL (issue 36, docs/contracts.md): their
// DDL, the rows a range's logs decode into, and their place in every write and rollback.
//
// ContractTables is a contracts config compiled for the write path: which configured tables a log
// belongs to (by address, block and topic 0), and the COPY rows of its decoded values. A log of a
// configured address whose topic 0 is a selected event's, but which does not fit that event (a
// topic count or data length the ABI does not allow), is written to the schema's `undecoded` table
// with the reason, never skipped and never guessed at. A string the column cannot hold (not UTF-8,
// or a NUL byte) is NULL in its row and the log is listed in `undecoded` too. An anonymous event
// matches a log of its contract with its topic count that no selected event's topic 0 claims.
//
// Tables (ApplyContractTables, at start, under the migration lock): `{schema}.{table}` as
// abi/tables.h names them, partitioned by block like the data tables (store/partitions.h creates
// their partitions with everyone else's), primary key (block_number, log_index); `{schema}.
// undecoded` keyed by (block_number, log_index, table_name). Each is registered in
// decoded_tables (migrations/015_decoded.sql) with its definition: a configured event whose table
// exists with another definition (its ABI changed) is refused, naming the table, unless it is in
// `rebuild` (then dropped and made again, empty: the runs refill it, see below).
//
// Factories: a contract configured by `factory` has as addresses the children its factories'
// events name, each from the block of the event that created it (logs of that block included).
// Children are rows of `{schema}.children` (block_number, log_index, contract, address, factory),
// partitioned and rolled back like the rest: a range's write records the children its logs
// create and decodes its logs with every child created up to them. A range can commit before the
// range holding a child's creation (a fleet commits in any order): the write that finds the child
// then decodes the child's logs of every committed block above it from the stored `logs` table
// (the child's cursor runs from its creation to what is committed), in the same transaction. So
// the tables are the same whatever order ranges commit in. The race between a write that finds a
// child and a write above it that cannot know it yet is closed by a lock (LockForChildren): writes
// that create children take it exclusively, every other write of a config with factories shares
// it, first thing in the transaction; the finder's read of the stored logs then sees every write
// that did not see the child.
//
// Completeness: every write of a range holds one dataset per configured table,
// DecodedTableDataset (store/datasets.h), so a range committed before a table existed (the
// contract was added to the config later) lacks it and is written again by the next run that
// asks for it, like any dataset. Tables of contracts removed from the config keep their rows;
// writes leave them alone (a rollback still deletes their rows above the fork point).
//
// Decoding stored logs (decoded_stored.cc): in full mode every log of a committed range is in
// `logs` already, so a range that lacks only tables of the config (a contract, event or factory
// added later, an ABI rebuilt, an address changed) is decoded from its stored blocks and logs
// (ReadStoredForDecoding, a RangeWrite with decode_only: store/writer.h) instead of being fetched
// from the node and written whole again: only its decoded rows are written, the rest stays as it
// is. The write checks, under the lock a rollback waits for, that the blocks it read are still
// the stored ones (CheckStoredForDecoding), so a rollback in between makes it read again.
//
// Writes (WriteDecodedRows, inside the range's transaction, after its fence): the configured
// tables' rows of the range are deleted and COPied again from the range's logs, so a write is
// idempotent and a replay equals the first. Rollback deletes the rows of every registered table
// above the fork point (DeleteDecodedAboveSql).
//
// ContractTables is immutable once made: thread-safe. The functions taking a PgConn are as safe
// as it is (one thread at a time).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "abi/config.h"
#include "abi/tables.h"
#include "core/model.h"
#include "core/status.h"
#include "store/datasets.h"
#include "store/pg.h"

namespace gapless {

struct RangeWrite;  // store/writer.h

// Table names are at most this long, so a partition's name ("_p" + its first block) fits
// PostgreSQL's 63 bytes.
inline constexpr size_t kMaxDecodedTableName = 40;

class ContractTables {
 public:
  // FailedPrecondition naming the table when a name is too long for partitions.
  static Result<ContractTables> Make(const abi::ContractsConfig& config);

  const std::string& schema() const { return schema_; }
  const std::vector<abi::EventTable>& tables() const { return tables_; }
  // One dataset per table: what a write of these tables holds.
  const Datasets& datasets() const { return datasets_; }

  // Rows decoded from one range's logs, as COPY text: one buffer per table (tables() order), the
  // undecoded rows, and the children the range's factory events create.
  struct Rows {
    std::vector<std::string> tables;
    std::vector<size_t> counts;
    std::string undecoded;
    size_t undecoded_count = 0;
    std::string children;
  };
  // A factory's child: the contract (index in the config) it is an instance of, from `block` on.
  struct Child {
    int contract = 0;
    std::string address;  // "0x" + 40 lower-case hex digits
    uint64_t block = 0;
    uint32_t log_index = 0;
    std::string factory;
  };
  // Children by address.
  using Children = std::unordered_map<std::string, std::vector<Child>>;

  bool has_factories() const { return !factories_.empty(); }
  // True when `factory` ("0x" hex) is one of the configured factories of contract `contract`.
  bool IsFactoryOf(int contract, const std::string& factory) const;
  // The children the factory events among `blocks`' logs create, in chain order. A factory event
  // that does not fit its ABI, or names no valid address, is listed in `out->undecoded`.
  Status FindChildren(const std::vector<BlockData>& blocks, std::vector<Child>* children,
                      Rows* out) const;
  // Decodes the logs of the configured addresses (unless children_only) and of `children` (each
  // from its block on; one entry per contract and address counts, the earliest). InvalidData
  // naming the block and log when a log's hex fields do not parse (the decoder checked them: a
  // bug).
  Status Decode(const std::vector<BlockData>& blocks, const Children& children, Rows* out,
                bool children_only = false) const;
  // What an eth_getLogs filter for these contracts asks (the `events` data mode): every configured
  // address ("0x" hex, sorted, unique), and the selected events' topic 0s ("0x" hex, sorted,
  // unique), or none (any topic) when an anonymous event is selected (its logs have no topic 0 to
  // ask for).
  std::vector<std::string> FilterAddresses() const;
  std::vector<std::string> FilterTopic0s() const;
  // The events data mode with factories (docs/contracts.md): a child's address is known only
  // once its creation is read, and a child found late needs its logs of the committed blocks
  // above stored already (the finder decodes them from `logs`, as in full mode). So the filter
  // asks every address, by topic 0 alone: the selected events' and the factories' events' (empty
  // when a selected event is anonymous: no topic 0 to ask for, refused). KeepMatching then keeps
  // of the answer the logs of configured addresses and factories, and any address's logs whose
  // topic 0 is a selected event of a contract made by a factory (a child, maybe found later);
  // blocks left without a log are dropped.
  std::vector<std::string> FactoryFilterTopic0s() const;
  void KeepMatching(std::vector<BlockData>* blocks) const;
  // Names of the config's contracts, in config order.
  const std::vector<std::string>& contract_names() const { return contract_names_; }

 private:
  struct Contract {
    uint64_t from = 0;
    uint64_t to = UINT64_MAX;
    std::unordered_map<std::string, std::vector<int>> by_topic0;  // "0x" hex -> table indexes
    std::vector<int> anonymous;                                   // table indexes
  };
  struct Factory {
    int contract = 0;
    std::string address;  // "0x" hex
    std::string topic0;   // "0x" hex
    abi::Event event;
    int parameter = 0;
  };
  Status DecodeLog(const BlockData& block, const Log& log, const Contract& contract,
                   Rows* out) const;
  void AppendUndecoded(const Log& log, const std::string& table, const std::string& reason,
                       Rows* out) const;

  std::string schema_;
  std::vector<abi::EventTable> tables_;
  std::vector<Contract> contracts_;
  std::unordered_map<std::string, std::vector<int>> by_address_;  // "0x" hex -> contracts_
  std::vector<Factory> factories_;
  std::vector<std::string> contract_names_;
  Datasets datasets_;
};

// The dataset of one decoded table: "decoded:{schema}.{table}.{8 hex digits of a hash}" of its
// definition and of where its logs come from (`sources`: the contract's addresses, factories and
// block window), so a table made again with another definition, or fed from other addresses, is
// a new dataset that the committed ranges lack: they are written again, and their rows replaced.
std::string DecodedTableDataset(const abi::EventTable& table, const std::string& sources);

// Creates the schema, its tables and partitions and registers them (see above). `rebuild`: table
// names ("schema.table" or "table") whose changed definition is accepted by dropping them.
Status ApplyContractTables(PgConn& conn, const ContractTables& tables,
                           const std::vector<std::string>& rebuild = {});

// First thing in the writer's transaction of a config with factories: takes the children's lock,
// exclusively when the range's logs create children (see "Factories"). Nothing otherwise.
Status LockForChildren(PgConn& conn, const ContractTables& tables, const RangeWrite& write);

// Inside the writer's transaction: replaces the range's rows of the configured tables, records
// the children it creates and decodes their logs of committed blocks above it.
Status WriteDecodedRows(PgConn& conn, const ContractTables& tables, const RangeWrite& write,
                        std::string* buffer);

// Status::reason() of a decode-only write whose range changed since it was read (a rollback, a
// write of a run holding less): read it again.
inline constexpr std::string_view kStoredRangeChangedReason = "stored-range-changed";

// The datasets every block of [from, to] holds (store/datasets.h: some indexed_ranges row
// covering it lists the name); empty when a block is not committed.
Result<Datasets> DatasetsHeldThroughout(PgConn& conn, uint64_t from, uint64_t to);

// Full mode: when every block of [w->from_block, w->to_block] is committed whole ("blocks") and
// what `asked` wants beyond what they hold is only tables of `tables`, fills *w with the stored
// blocks and logs (decode_only, datasets = what they hold) and returns true; false (*w untouched)
// when the range must be fetched.
Result<bool> ReadStoredForDecoding(PgConn& conn, const ContractTables& tables,
                                   const Datasets& asked, RangeWrite* w);

// Inside a decode-only write's transaction, first: locks indexed_ranges as a range write does
// (a rollback commits before or waits), then Aborted (kStoredRangeChangedReason) unless the
// range's stored blocks are w's (number and hash) and hold every dataset of w.datasets.
Status CheckStoredForDecoding(PgConn& conn, const RangeWrite& w);

// "{schema}.{table}" of every registered table, the undecoded tables included, for rollback and
// partitions. Empty before the contracts mode was ever used.
Result<std::vector<std::string>> RegisteredDecodedTables(PgConn& conn);

// DELETE statements for every registered table's rows above `fork` (rollback.cc).
Result<std::string> DeleteDecodedAboveSql(PgConn& conn, uint64_t fork);

}  // namespace gapless
