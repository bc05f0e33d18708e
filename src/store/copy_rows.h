// copy_rows: the data tables' column lists and the COPY text serialisation of a block's rows.
//
// Internal to store/ (the writer uses it; the write benchmark uses it for its raw-COPY baseline).
// Serialisation appends straight into one growing buffer: integers through std::to_chars, hex
// strings validated and copied once as bytea hex input (`\\x...`), nothing allocated per row
// except for U256 values that need more than 64 bits. Values that PostgreSQL would reject or,
// worse, that would break the COPY framing (a non-hex character in a hash, a tab in a JSON text)
// are refused here with InvalidData naming the block, the row and the field. Pure functions;
// thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "core/model.h"
#include "core/status.h"

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

// Appends the rows `table` gets from `data` in COPY text format (tab-separated, \N for NULL,
// newline-terminated). On InvalidData, `out` holds a partial row: discard the COPY.
Status AppendCopyRows(DataTable table, const BlockData& data, std::string* out);

// How many rows `table` gets from `data`.
size_t RowCount(DataTable table, const BlockData& data);

}  // namespace gapless
