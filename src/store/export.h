// export: stored data as CSV in exactly ethereum-etl's format (columns, order, serialisation), so
// gapless can stand in for `ethereumetl export_*` and its output can be diffed against it; and
// the contracts mode's decoded tables in the same CSV ("Decoded tables" below).
//
// Tables and columns (fixtures/MANIFEST.md §2.1-2.5):
//   blocks           number,hash,parent_hash,nonce,sha3_uncles,logs_bloom,transactions_root,
//                    state_root,receipts_root,miner,difficulty,total_difficulty,size,extra_data,
//                    gas_limit,gas_used,timestamp,transaction_count,base_fee_per_gas,
//                    withdrawals_root,withdrawals
//   transactions     hash,nonce,block_hash,block_number,transaction_index,from_address,to_address,
//                    value,gas,gas_price,input,block_timestamp,max_fee_per_gas,
//                    max_priority_fee_per_gas,transaction_type
//   receipts         transaction_hash,transaction_index,block_hash,block_number,
//                    cumulative_gas_used,gas_used,contract_address,root,status,effective_gas_price,
//                    l1_fee,l1_gas_used,l1_gas_price,l1_fee_scalar   (l1_* always empty)
//   logs             log_index,transaction_hash,transaction_index,block_hash,block_number,address,
//                    data,topics
//   token_transfers  token_address,from_address,to_address,value,transaction_hash,log_index,
//                    block_number
//   traces           block_number,transaction_hash,transaction_index,from_address,to_address,
//                    value,input,output,trace_type,call_type,reward_type,gas,gas_used,subtraces,
//                    trace_address,error,status,trace_id   (trace_address joined with ",")
//   contracts        address,bytecode,function_sighashes,is_erc20,is_erc721,block_number
//                    (function_sighashes joined with ","; the flags True/False, as Python writes
//                    them)
//   tokens           address,symbol,name,decimals,total_supply,block_number (the block where the
//                    token first appeared; ethereum-etl's export_tokens leaves it empty, its
//                    stream sets it as here: rows by that block)
// Serialisation (§2.8): Python csv minimal quoting (a field is quoted when it holds a comma, a
// double quote, CR or LF; quotes are doubled), "\n" line ends, an empty cell for NULL, the header
// only before the first row (no rows: a 0-byte output). Hex is lower-case 0x-hex ("0x" for empty
// data); integers are exact decimals at any size. topics are joined with "," (so quoted when there
// are two or more); withdrawals are compact JSON objects
// {"index":..,"validator_index":..,"address":"0x..","amount":..} joined with ",".
//
// Token transfers: ethereum-etl knows only the ERC-20/721 Transfer event, and reports an ERC-721
// transfer's token id in `value`. So by default only erc20 and erc721 rows are exported, erc721
// with value = token id. ExportOptions.token_standards can add erc1155 (rows of a TransferBatch
// share their log_index; value = the amount) or narrow the set.
//
// Decoded tables (the contracts mode, docs/contracts.md): a name with a dot, "schema.table", is one
// of the tables registered in decoded_tables (`{schema}.undecoded` and `{schema}.children`
// included). FindDecodedTable checks the name against that registry, and only the registry's and
// the catalog's identifiers (double-quoted) go into the SQL, never the name as given. The header is
// the table's column names in table order; rows are those of blocks [from, to] ordered by the
// primary key (block_number, log_index; undecoded adds table_name, children contract). Values:
// BIGINT, INTEGER and NUMERIC(78,0) as exact decimals (negative ones with "-"), BYTEA as 0x-hex
// ("0x" for empty), BOOLEAN as true/false (lower case, as SQL writes them: not Python's
// True/False of the contracts table above), TEXT as stored, JSONB as its JSON text made compact
// (no whitespace outside strings; keys in jsonb's order), NULL as an empty cell; quoting, line
// ends and the 0-byte output for no rows as above.
//
// Rows are ordered by block number, then index, and streamed (libpq single-row mode): memory
// stays small however large the interval. Thread-safety: as for the PgConn.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "store/pg.h"

namespace gapless {

enum class ExportTable {
  kBlocks,
  kTransactions,
  kReceipts,
  kLogs,
  kTokenTransfers,
  kTraces,
  kContracts,
  kTokens
};

// "blocks", "transactions", "receipts", "logs", "token_transfers", "traces", "contracts",
// "tokens"; FailedPrecondition otherwise.
Result<ExportTable> ParseExportTable(std::string_view name);
const char* ExportTableName(ExportTable table);

struct ExportOptions {
  // Which token standards token_transfers exports (ethereum-etl: erc20 and erc721).
  std::vector<TokenStandard> token_standards = {TokenStandard::kErc20, TokenStandard::kErc721};
};

// "erc20,erc721,erc1155" (any non-empty subset, any order); FailedPrecondition otherwise.
Result<std::vector<TokenStandard>> ParseTokenStandards(std::string_view list);

// Writes the rows of blocks [from, to]. FailedPrecondition if `out` fails (disk full, closed pipe);
// database errors as PgConn reports them. On error the output holds a prefix of the rows.
Status ExportCsv(PgConn& conn, ExportTable table, uint64_t from, uint64_t to, std::ostream& out,
                 const ExportOptions& options = {});

// True when `name` names a decoded table rather than one of ExportTable's: it holds a dot.
bool IsDecodedTableName(std::string_view name);

// A registered decoded table as the catalog describes it: what ExportDecodedCsv reads.
struct DecodedExportTable {
  std::string schema;  // as registered in decoded_tables
  std::string table;
  struct Column {
    std::string name;
    std::string type;  // PostgreSQL's name of it: "bigint", "numeric", "bytea", "jsonb", ...
  };
  std::vector<Column> columns;     // in table order
  std::vector<std::string> order;  // the primary key's columns
};

// Looks `name` ("schema.table") up in decoded_tables and the catalog. FailedPrecondition naming it
// when it is not registered, listing the tables registered in its schema (or saying there are
// none), and when a registered table is missing from the database.
Result<DecodedExportTable> FindDecodedTable(PgConn& conn, std::string_view name);

// Writes the rows of blocks [from, to] of `table` (see "Decoded tables" above). Errors as
// ExportCsv.
Status ExportDecodedCsv(PgConn& conn, const DecodedExportTable& table, uint64_t from, uint64_t to,
                        std::ostream& out);

// The blocks of [from, to] the database does not hold, as inclusive intervals in order, at most
// `limit` of them: an export of them has no rows, which must not pass for "no activity". In an
// events-mode database (store/writer.h EnsureDataMode): the blocks no committed range covers.
Result<std::vector<std::pair<uint64_t, uint64_t>>> MissingBlocks(PgConn& conn, uint64_t from,
                                                                 uint64_t to, size_t limit);

// Appends `field` with Python csv QUOTE_MINIMAL quoting.
void AppendCsvField(std::string_view field, std::string* out);

}  // namespace gapless
