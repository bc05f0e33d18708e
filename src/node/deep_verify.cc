// verify --deep (see deep_verify.h).
#include "node/deep_verify.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>

#include "core/env.h"
#include "decode/decode.h"
#include "store/reader.h"
#include "verify/encode.h"

namespace gapless {
namespace {

std::string TxContext(const Transaction& tx, size_t i) {
  return "transaction " + std::to_string(i) + " (" + tx.hash + ")";
}

// VerifyBlock's messages start with "block N: "; the report prints the number itself.
std::string WithoutBlockPrefix(const std::string& message, uint64_t number) {
  std::string prefix = "block " + std::to_string(number) + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

bool NotVerifiable(const Status& st) {
  return st.code() == Code::kFailedPrecondition &&
         (st.reason() == verify::kUnsupportedTxTypeReason ||
          st.reason() == verify::kUnsupportedHeaderReason);
}

// "... (and 3 more transactions)" when a check fails for several transactions of a block: the
// first one is named, the rest counted, so one bad header field does not flood the report.
std::string AndMore(size_t more) {
  if (more == 0) return "";
  return " (and " + std::to_string(more) + " more " + (more == 1 ? "transaction" : "transactions") +
         ")";
}

// gas_used of each transaction is the rise of cumulativeGasUsed (proven by receiptsRoot), and
// the header's gasUsed (proven by the block hash) is the last receipt's cumulativeGasUsed.
void CheckGasUsed(const BlockData& data, std::vector<std::string>* problems) {
  uint64_t previous = 0;
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < data.transactions.size(); ++i) {
    const Transaction& tx = data.transactions[i];
    if (tx.cumulative_gas_used < previous) {
      if (bad++ == 0) {
        first = TxContext(tx, i) + ": cumulativeGasUsed " + std::to_string(tx.cumulative_gas_used) +
                " is below the previous receipt's " + std::to_string(previous);
      }
    } else if (tx.gas_used != tx.cumulative_gas_used - previous) {
      if (bad++ == 0) {
        first = TxContext(tx, i) + ": gas_used is " + std::to_string(tx.gas_used) +
                " but cumulativeGasUsed rises by " +
                std::to_string(tx.cumulative_gas_used - previous);
      }
    }
    previous = tx.cumulative_gas_used;
  }
  if (bad > 0) problems->push_back(first + AndMore(bad - 1));
  if (data.block.gas_used != previous) {
    problems->push_back("gasUsed is " + std::to_string(data.block.gas_used) +
                        " but the stored receipts' cumulativeGasUsed ends at " +
                        std::to_string(previous));
  }
}

// 256-bit arithmetic for the fee rule (core/u256.h has none): little-endian 64-bit words.
using Words = std::array<uint64_t, 4>;

Words ToWords(const U256& value) {
  std::string hex = value.ToHexQuantity().substr(2);
  Words out{0, 0, 0, 0};
  for (size_t w = 0; w < 4 && !hex.empty(); ++w) {
    size_t take = std::min<size_t>(16, hex.size());
    const char* begin = hex.data() + hex.size() - take;
    std::from_chars(begin, begin + take, out[w], 16);  // ToHexQuantity's digits always parse
    hex.resize(hex.size() - take);
  }
  return out;
}

bool Less(const Words& a, const Words& b) {
  for (int w = 3; w >= 0; --w) {
    if (a[w] != b[w]) return a[w] < b[w];
  }
  return false;
}

// a + b, or nullopt above 2^256-1.
std::optional<Words> Add(const Words& a, const Words& b) {
  Words out{};
  uint64_t carry = 0;
  for (size_t w = 0; w < 4; ++w) {
    uint64_t sum = a[w] + b[w];
    uint64_t next_carry = sum < a[w] ? 1 : 0;
    out[w] = sum + carry;
    if (out[w] < sum) next_carry = 1;
    carry = next_carry;
  }
  if (carry != 0) return std::nullopt;
  return out;
}

// The price per gas the sender paid, as the protocol fixes it: gasPrice for types 0 and 1,
// min(maxFeePerGas, baseFee + maxPriorityFeePerGas) for types 2-4 (EIP-1559). nullopt when a
// needed field is absent (then nothing is compared).
std::optional<Words> ExpectedEffectiveGasPrice(const Transaction& tx, const Block& block) {
  uint8_t type = tx.transaction_type.value_or(0);
  if (type <= 1) {
    if (!tx.gas_price) return std::nullopt;
    return ToWords(*tx.gas_price);
  }
  if (!block.base_fee_per_gas || !tx.max_fee_per_gas || !tx.max_priority_fee_per_gas) {
    return std::nullopt;
  }
  Words max_fee = ToWords(*tx.max_fee_per_gas);
  std::optional<Words> sum =
      Add(ToWords(*block.base_fee_per_gas), ToWords(*tx.max_priority_fee_per_gas));
  if (!sum || Less(max_fee, *sum)) return max_fee;
  return sum;
}

void CheckEffectiveGasPrice(const BlockData& data, std::vector<std::string>* problems) {
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < data.transactions.size(); ++i) {
    const Transaction& tx = data.transactions[i];
    if (!tx.effective_gas_price) continue;  // not sent by the node (older clients)
    std::optional<Words> expected = ExpectedEffectiveGasPrice(tx, data.block);
    if (!expected || *expected == ToWords(*tx.effective_gas_price)) continue;
    if (bad++ == 0) {
      first = TxContext(tx, i) + ": effective_gas_price is " + tx.effective_gas_price->ToDecimal() +
              " but its fee fields and the block's base fee give a different price";
    }
  }
  if (bad > 0) problems->push_back(first + AndMore(bad - 1));
}

// The token_transfers rows are derived from the logs (decode/decode.h ExtractTokenTransfers):
// the stored rows must be exactly what the stored (and proven) logs give.
void CheckTokenTransfers(const BlockData& data, std::vector<std::string>* problems) {
  std::vector<TokenTransfer> derived;
  for (const Log& log : data.logs) AppendTokenTransfers(log, &derived);
  if (derived == data.token_transfers) return;
  auto [stored_it, derived_it] = std::mismatch(
      data.token_transfers.begin(), data.token_transfers.end(), derived.begin(), derived.end());
  std::string where;
  if (stored_it != data.token_transfers.end()) {
    where = "the stored row at log " + std::to_string(stored_it->log_index) + "." +
            std::to_string(stored_it->batch_index);
  } else {
    where = "log " + std::to_string(derived_it->log_index) + "." +
            std::to_string(derived_it->batch_index) + ", which is not stored";
  }
  problems->push_back("token_transfers: " + std::to_string(data.token_transfers.size()) +
                      " rows stored but the logs give " + std::to_string(derived.size()) +
                      "; the first difference: " + where);
}

void CheckDerivedColumns(const BlockData& data, std::vector<std::string>* problems) {
  CheckGasUsed(data, problems);
  CheckEffectiveGasPrice(data, problems);
  CheckTokenTransfers(data, problems);
}

std::string ChecksText(const VerifyOptions& options) {
  std::string out =
      "transaction hashes, transactions/receipts/withdrawals roots, logs blooms, block hash, "
      "gas used, effective gas price, token transfers";
  if (options.recover_senders) out += ", senders";
  if (options.anvil_blob_sidecar_quirk) {
    out += "; --anvil-blob-roots: transactionsRoot not compared for blocks with blob transactions";
  }
  return out;
}

}  // namespace

BlockVerdict DeepVerifyBlock(const BlockData& data, const VerifyOptions& options) {
  BlockVerdict verdict;
  Status st = VerifyBlock(data, options);
  if (NotVerifiable(st)) {
    verdict.kind = BlockVerdict::Kind::kNotVerifiable;
    verdict.problems.push_back(WithoutBlockPrefix(st.message(), data.block.number));
    return verdict;
  }
  if (!st.ok()) verdict.problems.push_back(WithoutBlockPrefix(st.message(), data.block.number));
  size_t verify_problems = verdict.problems.size();
  // Run even when VerifyBlock failed: it names the first failing check only, and these name a
  // stored column (a changed header gasUsed shows here as gasUsed, there only as the block hash).
  CheckDerivedColumns(data, &verdict.problems);
  if (verdict.problems.empty()) return verdict;
  verdict.kind = BlockVerdict::Kind::kFailed;
  bool has_blobs = std::any_of(data.transactions.begin(), data.transactions.end(),
                               [](const Transaction& tx) { return tx.transaction_type == 3; });
  if (!options.anvil_blob_sidecar_quirk && has_blobs && verify_problems == 1 &&
      verdict.problems.size() == 1) {
    VerifyOptions with_quirk = options;
    with_quirk.anvil_blob_sidecar_quirk = true;
    verdict.passes_with_anvil_quirk = VerifyBlock(data, with_quirk).ok();
  }
  return verdict;
}

Status DeepVerify(PgConn& conn, uint64_t from, uint64_t to, const DeepVerifyOptions& options,
                  VerifyReport* report) {
  VerifyReport::Deep& deep = report->deep.emplace();
  deep.checks = ChecksText(options.verify);
  if (from > to) return Status::Ok();
  uint64_t batch = std::max<uint64_t>(1, options.batch_blocks);
  Env* env = Env::Default();
  int64_t last_progress = env->NowMicros();
  // Logs and withdrawals are under the roots, transfers derived from logs; traces are under no
  // root (they were checked against their block when written).
  ReadOptions read;
  read.traces = false;
  read.tokens = false;
  for (uint64_t lo = from;; lo += batch) {
    uint64_t hi = to - lo < batch ? to : lo + batch - 1;
    GAPLESS_ASSIGN_OR_RETURN(std::vector<BlockData> blocks, ReadBlocks(conn, lo, hi, read));
    for (const BlockData& data : blocks) {
      BlockVerdict verdict = DeepVerifyBlock(data, options.verify);
      switch (verdict.kind) {
        case BlockVerdict::Kind::kVerified:
          ++deep.verified;
          break;
        case BlockVerdict::Kind::kNotVerifiable:
          if (deep.not_verifiable++ == 0) {
            deep.first_not_verifiable =
                VerifyReport::Inconsistency{data.block.number, verdict.problems.front()};
          }
          break;
        case BlockVerdict::Kind::kFailed:
          ++deep.failed_blocks;
          if (verdict.passes_with_anvil_quirk) ++deep.anvil_quirk_blocks;
          for (std::string& problem : verdict.problems) {
            if (deep.failures.size() >= VerifyReport::kMaxListed) {
              deep.truncated = true;
              break;
            }
            deep.failures.push_back({data.block.number, std::move(problem)});
          }
          break;
      }
    }
    if (options.progress_interval_ms > 0 &&
        env->NowMicros() - last_progress >= options.progress_interval_ms * 1000) {
      last_progress = env->NowMicros();
      spdlog::info("verify --deep: blocks {}..{} checked ({} verified, {} failed)", from, hi,
                   deep.verified, deep.failed_blocks);
    }
    if (hi >= to) break;
  }
  return Status::Ok();
}

}  // namespace gapless
