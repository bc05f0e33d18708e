// row_reader: reading stored rows back into the data model, column by column (the inverse of
// copy_rows), shared by the readers of the store module (reader.cc, retractions.cc). Internal to
// store/: not for other modules.
//
// Thread-safety: a RowReader is used by one thread, while its PgResult lives.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "store/pg.h"

namespace gapless::store_detail {

// The SQL that selects a BYTEA column as 0x-hex text.
inline std::string H(const char* column) {
  return std::string("'0x' || encode(") + column + ", 'hex')";
}

// Reads the columns of one row left to right, remembering the first parse error.
class RowReader {
 public:
  RowReader(const PgResult& res, int row, const char* table)
      : res_(res), row_(row), table_(table) {}

  const Status& status() const { return status_; }

  std::string Str() { return std::string(Next()); }
  std::optional<std::string> OptStr() {
    if (res_.IsNull(row_, col_)) return Skip<std::string>();
    return Str();
  }
  uint64_t U64() {
    std::string_view text = Next();
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size()) Fail("integer", text);
    return v;
  }
  template <typename T = uint64_t>
  std::optional<T> OptU64() {
    if (res_.IsNull(row_, col_)) return Skip<T>();
    return static_cast<T>(U64());
  }
  U256 Dec() {
    std::string_view text = Next();
    auto v = U256::FromDecimal(text);
    if (!v.has_value()) {
      Fail("decimal", text);
      return U256();
    }
    return *v;
  }
  std::optional<U256> OptDec() {
    if (res_.IsNull(row_, col_)) return Skip<U256>();
    return Dec();
  }
  bool Bool() { return Next() == "t"; }
  // bytea hex digits (no prefix) as a canonical quantity: "0x1b", "0x0".
  std::optional<std::string> OptQuantity() {
    if (res_.IsNull(row_, col_)) return Skip<std::string>();
    std::string_view digits = Next();
    size_t nz = digits.find_first_not_of('0');
    if (nz == std::string_view::npos) return std::string("0x0");
    return "0x" + std::string(digits.substr(nz));
  }
  std::vector<std::string> List() {
    std::vector<std::string> out;
    if (res_.IsNull(row_, col_)) {
      ++col_;
      return out;
    }
    std::string_view text = Next();
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t comma = text.find(',', pos);
      if (comma == std::string_view::npos) comma = text.size();
      out.emplace_back(text.substr(pos, comma - pos));
      pos = comma + 1;
    }
    return out;
  }

 private:
  std::string_view Next() { return res_.Get(row_, col_++); }
  template <typename T>
  std::optional<T> Skip() {
    ++col_;
    return std::nullopt;
  }
  void Fail(const char* kind, std::string_view text) {
    if (status_.ok()) {
      status_ = InvalidData(std::string(table_) + " column " + std::to_string(col_ - 1) +
                            ": not a " + kind + ": " + std::string(text));
    }
  }

  const PgResult& res_;
  int row_;
  int col_ = 0;
  const char* table_;
  Status status_;
};

// The token transfer columns ReadTransfer reads, in order, for a SELECT from token_transfers or
// a table with its columns (event_retraction_transfers).
std::string TransferColumns();
// One token transfer from the row at the reader's position (TransferColumns()).
TokenTransfer ReadTransfer(RowReader& r, uint64_t block_number);

}  // namespace gapless::store_detail
