// tables: the typed table each configured event is decoded into, and its columns (issue 36).
//
// A table is {schema}.{snake(contract)}_{snake(event)}; an event whose name is overloaded in its
// contract's ABI gets "_" + the first 4 bytes of its topic 0 in hex ("pools_swap_c42079f9"). The
// fixed columns come first (kFixedColumns), then one per input in ABI order, named snake(input
// name), or "arg{i}" (i its input index) when the name is empty, collides with a fixed column or
// with an earlier input, or snakes to no usable identifier (over 63 bytes, a leading digit).
// Column types: intN (N <= 64) and uintN (N <= 56) BIGINT, wider integers NUMERIC(78,0); address,
// bytesN, bytes and indexed strings, arrays and tuples (their topic hash) BYTEA; bool BOOLEAN;
// string TEXT; arrays and tuples JSONB (abi::ToJson). Pure, thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "abi/abi.h"
#include "abi/config.h"

namespace gapless::abi {

enum class ColumnType { kBigint, kNumeric, kBytea, kBoolean, kText, kJsonb };

// "BIGINT", "NUMERIC(78,0)", "BYTEA", "BOOLEAN", "TEXT", "JSONB".
const char* ColumnTypeSql(ColumnType type);

// block_number, block_hash, block_timestamp, transaction_hash, transaction_index, log_index,
// address.
inline constexpr std::string_view kFixedColumns[] = {
    "block_number",      "block_hash", "block_timestamp", "transaction_hash",
    "transaction_index", "log_index",  "address"};

struct Column {
  std::string name;
  ColumnType type = ColumnType::kBigint;
  int input = 0;  // index in the event's inputs
};

struct EventTable {
  std::string schema;    // the config's name
  std::string table;     // without the schema
  std::string contract;  // the contract's name as configured
  Event event;
  std::string topic0;           // raw 32 bytes ("" for an anonymous event)
  std::vector<Column> columns;  // the inputs' columns, after kFixedColumns

  // What the table's shape depends on, as text stored beside it: a change means the table no
  // longer fits (the event's signature, each input's name, type and indexed flag, anonymity).
  std::string Definition() const;
};

// "PoolCreated" -> "pool_created", "tickSpacing" -> "tick_spacing", "ERC20Token" ->
// "erc20_token", "_value" -> "value" (leading underscores dropped; "" stays "").
std::string SnakeCase(std::string_view name);

// The column type of an input (indexed dynamic inputs are BYTEA whatever their type).
ColumnType ColumnTypeOf(const Param& input);

// One table per selected event of every contract, in config order.
std::vector<EventTable> PlanTables(const ContractsConfig& config);

}  // namespace gapless::abi
