// copy_rows: the data tables' column lists and the COPY serialisation of a block's rows, in
// PostgreSQL's binary COPY format (the default) or its text format.
//
// Internal to store/ (the writer uses it; the write benchmarks use it for their raw-COPY
// baselines). Serialisation appends straight into one growing buffer, nothing allocated per row
// except for U256 values that need more than 64 bits.
//   binary  every value in its type's wire form: integers big-endian at the column's width
//           (BIGINT 8, INTEGER 4, SMALLINT 2 bytes), BYTEA as the decoded bytes, NUMERIC as
//           base-10000 digits, arrays with their element type's OID. The server parses nothing:
//           no hex decoding, no decimal parsing, no escape scanning (the backend's share of a
//           write is what limits the fleet, bench/RESULTS.md).
//   text    tab-separated, \N for NULL, integers through std::to_chars, bytea hex input.
// Both refuse the same values with InvalidData naming the block, the row and the field, before
// PostgreSQL sees them: a value that would break the COPY framing (a non-hex character in a
// hash, a NUL in a JSON text) and an integer that does not fit its column (binary COPY would
// otherwise store it truncated). The serialisers are pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "store/pg.h"

namespace gapless {

enum class DataTable {
  kBlocks,
  kWithdrawals,
  kTransactions,
  kLogs,
  kTokenTransfers,
  kTraces,
  kContracts
};

// Every data table keyed by block, in the order the writer fills them. (tokens is keyed by
// address and upserted: store/writer.cc.)
inline constexpr std::array<DataTable, 7> kDataTables = {
    DataTable::kBlocks,         DataTable::kWithdrawals, DataTable::kTransactions, DataTable::kLogs,
    DataTable::kTokenTransfers, DataTable::kTraces,      DataTable::kContracts};

struct DataTableInfo {
  const char* name;          // "transactions"
  const char* columns;       // the COPY column list, in serialisation order
  const char* block_column;  // "number" for blocks, "block_number" elsewhere
  const char* key;           // the primary key columns, for ORDER BY
};

const DataTableInfo& TableInfo(DataTable table);

enum class CopyFormat { kBinary, kText };

// "binary" / "text", and back (nullopt for anything else).
const char* CopyFormatName(CopyFormat format);
std::optional<CopyFormat> ParseCopyFormat(std::string_view name);

// "COPY target (columns) FROM STDIN" with the format's options.
std::string CopyStatement(DataTable table, const std::string& target, CopyFormat format);

// What a COPY stream starts and ends with: binary's signature and header, its end-of-data mark
// (empty for text).
void AppendCopyHeader(CopyFormat format, std::string* out);
void AppendCopyTrailer(CopyFormat format, std::string* out);

// Appends the rows `table` gets from `data` (text: tab-separated, \N for NULL,
// newline-terminated; binary: one tuple per row). On InvalidData, `out` holds a partial row:
// discard the COPY.
Status AppendCopyRows(DataTable table, const BlockData& data, CopyFormat format, std::string* out);

// One whole COPY of `table`'s rows from `blocks` into `target` (a table name) on `conn`, sent in
// chunks of about `chunk_bytes` through `buffer` (reused across calls); nothing is sent for a
// table without rows. The writer and the benchmarks' raw-COPY baselines both copy through it.
Status CopyBlocks(PgConn& conn, DataTable table, const std::string& target,
                  const std::vector<BlockData>& blocks, CopyFormat format, size_t chunk_bytes,
                  std::string* buffer);

// How many rows `table` gets from `data`.
size_t RowCount(DataTable table, const BlockData& data);

}  // namespace gapless
