#include "store/reader.h"

#include <functional>
#include <string>

#include "store/row_reader.h"

namespace gapless {
namespace store_detail {

std::string TransferColumns() {
  return "log_index, batch_index, " + H("transaction_hash") + ", " + H("token_address") + ", " +
         H("from_address") + ", " + H("to_address") + ", " + H("operator_address") +
         ", token_id, value, token_standard";
}

TokenTransfer ReadTransfer(RowReader& r, uint64_t block_number) {
  TokenTransfer t;
  t.block_number = block_number;
  t.log_index = static_cast<uint32_t>(r.U64());
  t.batch_index = static_cast<uint32_t>(r.U64());
  t.transaction_hash = r.Str();
  t.token_address = r.Str();
  t.from_address = r.Str();
  t.to_address = r.Str();
  t.operator_address = r.OptStr();
  t.token_id = r.OptDec();
  t.value = r.Dec();
  t.standard = static_cast<TokenStandard>(r.U64());
  return t;
}

}  // namespace store_detail

using store_detail::H;
using store_detail::RowReader;

Result<std::vector<BlockData>> ReadBlocks(PgConn& conn, uint64_t from, uint64_t to,
                                          const ReadOptions& options) {
  std::vector<BlockData> out;
  if (from > to) return out;
  std::vector<PgParam> range = {std::to_string(from), std::to_string(to)};
  // In the caller's transaction when one is open (its snapshot), else in one of our own.
  const bool own_transaction = !conn.in_transaction();
  PgTransaction txn(conn);
  if (own_transaction) {
    GAPLESS_RETURN_IF_ERROR(txn.Begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  }

  if (options.event_columns_only) {
    GAPLESS_ASSIGN_OR_RETURN(
        auto blocks,
        conn.Query("SELECT number, " + H("hash") + ", " + H("parent_hash") + ", " + H("miner") +
                       ", gas_limit, gas_used, timestamp, transaction_count, base_fee_per_gas"
                       " FROM blocks WHERE number BETWEEN $1 AND $2 ORDER BY number",
                   range));
    for (int i = 0; i < blocks.rows(); ++i) {
      RowReader r(blocks, i, "blocks");
      BlockData d;
      Block& b = d.block;
      b.number = r.U64();
      b.hash = r.Str();
      b.parent_hash = r.Str();
      b.miner = r.Str();
      b.gas_limit = r.U64();
      b.gas_used = r.U64();
      b.timestamp = r.U64();
      b.transaction_count = static_cast<uint32_t>(r.U64());
      b.base_fee_per_gas = r.OptDec();
      GAPLESS_RETURN_IF_ERROR(r.status());
      out.push_back(std::move(d));
    }
  } else {
    GAPLESS_ASSIGN_OR_RETURN(
        auto blocks,
        conn.Query("SELECT number, " + H("hash") + ", " + H("parent_hash") + ", " + H("nonce") +
                       ", " + H("sha3_uncles") + ", " + H("logs_bloom") + ", " +
                       H("transactions_root") + ", " + H("state_root") + ", " + H("receipts_root") +
                       ", " + H("miner") + ", " + H("mix_hash") +
                       ", difficulty, total_difficulty, size, " + H("extra_data") +
                       ", gas_limit, gas_used, timestamp, transaction_count, base_fee_per_gas, " +
                       H("withdrawals_root") + ", blob_gas_used, excess_blob_gas, " +
                       H("parent_beacon_block_root") + ", " + H("requests_hash") +
                       " FROM blocks WHERE number BETWEEN $1 AND $2 ORDER BY number",
                   range));
    for (int i = 0; i < blocks.rows(); ++i) {
      RowReader r(blocks, i, "blocks");
      BlockData d;
      Block& b = d.block;
      b.number = r.U64();
      b.hash = r.Str();
      b.parent_hash = r.Str();
      b.nonce = r.Str();
      b.sha3_uncles = r.Str();
      b.logs_bloom = r.Str();
      b.transactions_root = r.Str();
      b.state_root = r.Str();
      b.receipts_root = r.Str();
      b.miner = r.Str();
      b.mix_hash = r.OptStr();
      b.difficulty = r.Dec();
      b.total_difficulty = r.OptDec();
      b.size = r.U64();
      b.extra_data = r.Str();
      b.gas_limit = r.U64();
      b.gas_used = r.U64();
      b.timestamp = r.U64();
      b.transaction_count = static_cast<uint32_t>(r.U64());
      b.base_fee_per_gas = r.OptDec();
      b.withdrawals_root = r.OptStr();
      b.blob_gas_used = r.OptU64();
      b.excess_blob_gas = r.OptU64();
      b.parent_beacon_block_root = r.OptStr();
      b.requests_hash = r.OptStr();
      GAPLESS_RETURN_IF_ERROR(r.status());
      out.push_back(std::move(d));
    }
  }
  // Child rows arrive ordered by block number, like `out`: walk both together.
  auto for_each_row = [&](const std::string& sql, const char* table,
                          const std::function<void(RowReader&, BlockData&)>& fill) -> Status {
    GAPLESS_ASSIGN_OR_RETURN(auto res, conn.Query(sql, range));
    size_t bi = 0;
    for (int i = 0; i < res.rows(); ++i) {
      RowReader r(res, i, table);
      uint64_t n = r.U64();
      while (bi < out.size() && out[bi].block.number < n) ++bi;
      if (bi == out.size() || out[bi].block.number != n) continue;  // orphan row: Verify's job
      fill(r, out[bi]);
      GAPLESS_RETURN_IF_ERROR(r.status());
    }
    return Status::Ok();
  };

  if (options.withdrawals) {
    GAPLESS_RETURN_IF_ERROR(
        for_each_row("SELECT block_number, withdrawal_index, validator_index, " + H("address") +
                         ", amount_gwei FROM withdrawals WHERE block_number BETWEEN $1 AND $2"
                         " ORDER BY block_number, withdrawal_index",
                     "withdrawals", [](RowReader& r, BlockData& d) {
                       Withdrawal w;
                       w.index = r.U64();
                       w.validator_index = r.U64();
                       w.address = r.Str();
                       w.amount_gwei = r.U64();
                       d.block.withdrawals.push_back(std::move(w));
                     }));
  }

  if (options.event_columns_only) {
    GAPLESS_RETURN_IF_ERROR(for_each_row(
        "SELECT block_number, transaction_index, " + H("hash") + ", " + H("block_hash") + ", " +
            H("from_address") + ", " + H("to_address") + ", value, gas_used, " +
            H("contract_address") +
            ", status, effective_gas_price FROM transactions"
            " WHERE block_number BETWEEN $1 AND $2 ORDER BY block_number, transaction_index",
        "transactions", [](RowReader& r, BlockData& d) {
          Transaction t;
          t.block_number = d.block.number;
          t.transaction_index = static_cast<uint32_t>(r.U64());
          t.hash = r.Str();
          t.block_hash = r.Str();
          t.from_address = r.Str();
          t.to_address = r.OptStr();
          t.value = r.Dec();
          t.gas_used = r.U64();
          t.contract_address = r.OptStr();
          t.status = r.OptU64<uint8_t>();
          t.effective_gas_price = r.OptDec();
          d.transactions.push_back(std::move(t));
        }));
  } else {
    GAPLESS_RETURN_IF_ERROR(for_each_row(
        "SELECT block_number, transaction_index, " + H("hash") + ", " + H("block_hash") +
            ", nonce, " + H("from_address") + ", " + H("to_address") + ", value, gas, gas_price, " +
            H("input") +
            ", transaction_type, max_fee_per_gas, max_priority_fee_per_gas, max_fee_per_blob_gas,"
            " (SELECT string_agg('0x' || encode(h, 'hex'), ',' ORDER BY i)"
            "  FROM unnest(blob_versioned_hashes) WITH ORDINALITY AS u(h, i)),"
            " access_list, authorization_list, chain_id, encode(v, 'hex'), encode(r, 'hex'),"
            " encode(s, 'hex'), y_parity, cumulative_gas_used, gas_used, " +
            H("contract_address") + ", " + H("root") + ", status, effective_gas_price, " +
            H("logs_bloom") +
            ", blob_gas_used, blob_gas_price, log_count FROM transactions"
            " WHERE block_number BETWEEN $1 AND $2 ORDER BY block_number, transaction_index",
        "transactions", [](RowReader& r, BlockData& d) {
          Transaction t;
          t.block_number = d.block.number;
          t.transaction_index = static_cast<uint32_t>(r.U64());
          t.hash = r.Str();
          t.block_hash = r.Str();
          t.nonce = r.U64();
          t.from_address = r.Str();
          t.to_address = r.OptStr();
          t.value = r.Dec();
          t.gas = r.U64();
          t.gas_price = r.OptDec();
          t.input = r.Str();
          t.transaction_type = r.OptU64<uint8_t>();
          t.max_fee_per_gas = r.OptDec();
          t.max_priority_fee_per_gas = r.OptDec();
          t.max_fee_per_blob_gas = r.OptDec();
          t.blob_versioned_hashes = r.List();
          t.access_list_json = r.OptStr();
          t.authorization_list_json = r.OptStr();
          t.chain_id = r.OptU64();
          t.v = r.OptQuantity();
          t.r = r.OptQuantity();
          t.s = r.OptQuantity();
          t.y_parity = r.OptU64<uint8_t>();
          t.cumulative_gas_used = r.U64();
          t.gas_used = r.U64();
          t.contract_address = r.OptStr();
          t.root = r.OptStr();
          t.status = r.OptU64<uint8_t>();
          t.effective_gas_price = r.OptDec();
          t.receipt_logs_bloom = r.Str();
          t.blob_gas_used = r.OptU64();
          t.blob_gas_price = r.OptDec();
          t.log_count = static_cast<uint32_t>(r.U64());
          d.transactions.push_back(std::move(t));
        }));
  }

  if (options.logs) {
    GAPLESS_RETURN_IF_ERROR(for_each_row(
        "SELECT block_number, log_index, transaction_index, " + H("transaction_hash") + ", " +
            H("block_hash") + ", " + H("address") + ", " + H("data") + ", concat_ws(',', " +
            H("topic0") + ", " + H("topic1") + ", " + H("topic2") + ", " + H("topic3") +
            "), removed FROM logs WHERE block_number BETWEEN $1 AND $2"
            " ORDER BY block_number, log_index",
        "logs", [](RowReader& r, BlockData& d) {
          Log l;
          l.block_number = d.block.number;
          l.log_index = static_cast<uint32_t>(r.U64());
          l.transaction_index = static_cast<uint32_t>(r.U64());
          l.transaction_hash = r.Str();
          l.block_hash = r.Str();
          l.address = r.Str();
          l.data = r.Str();
          l.topics = r.List();
          if (l.topics.size() == 1 && l.topics[0].empty()) l.topics.clear();
          l.removed = r.Bool();
          d.logs.push_back(std::move(l));
        }));
  }

  GAPLESS_RETURN_IF_ERROR(
      for_each_row("SELECT block_number, " + store_detail::TransferColumns() +
                       " FROM token_transfers WHERE block_number BETWEEN $1 AND $2"
                       " ORDER BY block_number, log_index, batch_index",
                   "token_transfers", [](RowReader& r, BlockData& d) {
                     d.token_transfers.push_back(store_detail::ReadTransfer(r, d.block.number));
                   }));

  if (options.traces && options.event_columns_only) {
    GAPLESS_RETURN_IF_ERROR(for_each_row(
        "SELECT block_number, " + H("transaction_hash") + ", transaction_index, " +
            H("from_address") + ", " + H("to_address") +
            ", value, trace_type, call_type, array_to_string(trace_address, ','), status"
            " FROM traces WHERE block_number BETWEEN $1 AND $2" +
            (options.internal_transfers_only ? std::string(" AND ") + kInternalTransferSql
                                             : std::string()) +
            " ORDER BY block_number, trace_index",
        "traces", [](RowReader& r, BlockData& d) {
          Trace t;
          t.block_number = d.block.number;
          t.transaction_hash = r.OptStr();
          t.transaction_index = r.OptU64<uint32_t>();
          t.from_address = r.OptStr();
          t.to_address = r.OptStr();
          t.value = r.OptDec();
          t.trace_type = r.Str();
          t.call_type = r.OptStr();
          for (const std::string& i : r.List()) {
            if (!i.empty()) t.trace_address.push_back(static_cast<uint32_t>(std::stoul(i)));
          }
          t.status = r.OptU64<int>();
          d.traces.push_back(std::move(t));
        }));
  } else if (options.traces) {
    GAPLESS_RETURN_IF_ERROR(for_each_row(
        "SELECT block_number, " + H("transaction_hash") + ", transaction_index, " +
            H("from_address") + ", " + H("to_address") + ", value, " + H("input") + ", " +
            H("output") +
            ", trace_type, call_type, reward_type, gas, gas_used, subtraces,"
            " array_to_string(trace_address, ','), error, status, trace_id"
            " FROM traces WHERE block_number BETWEEN $1 AND $2" +
            (options.internal_transfers_only ? std::string(" AND ") + kInternalTransferSql
                                             : std::string()) +
            " ORDER BY block_number, trace_index",
        "traces", [](RowReader& r, BlockData& d) {
          Trace t;
          t.block_number = d.block.number;
          t.transaction_hash = r.OptStr();
          t.transaction_index = r.OptU64<uint32_t>();
          t.from_address = r.OptStr();
          t.to_address = r.OptStr();
          t.value = r.OptDec();
          t.input = r.OptStr();
          t.output = r.OptStr();
          t.trace_type = r.Str();
          t.call_type = r.OptStr();
          t.reward_type = r.OptStr();
          t.gas = r.OptU64();
          t.gas_used = r.OptU64();
          t.subtraces = static_cast<uint32_t>(r.U64());
          for (const std::string& i : r.List()) {
            if (!i.empty()) t.trace_address.push_back(static_cast<uint32_t>(std::stoul(i)));
          }
          t.error = r.OptStr();
          t.status = r.OptU64<int>();
          t.trace_id = r.OptStr();
          d.traces.push_back(std::move(t));
        }));
  }

  if (options.tokens) {
    GAPLESS_RETURN_IF_ERROR(for_each_row(
        "SELECT DISTINCT x.block_number, " + H("k.address") +
            ", k.block_number, k.standard, k.name, k.symbol, k.decimals, k.total_supply"
            " FROM token_transfers x JOIN tokens k ON k.address = x.token_address"
            " WHERE x.block_number BETWEEN $1 AND $2 ORDER BY 1, 2",
        "tokens", [](RowReader& r, BlockData& d) {
          Token t;
          t.address = r.Str();
          t.block_number = r.U64();
          t.standard = r.Str();
          t.name = r.OptStr();
          t.symbol = r.OptStr();
          t.decimals = r.OptU64<uint32_t>();
          t.total_supply = r.OptDec();
          d.tokens.push_back(std::move(t));
        }));
  }

  if (own_transaction) GAPLESS_RETURN_IF_ERROR(txn.Commit());
  return out;
}

}  // namespace gapless
