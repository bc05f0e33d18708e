// --verify-complete in the events mode (events_complete.h): the headers' blooms, the admitted
// blocks' receipts proven against their receiptsRoot, their matching logs against eth_getLogs's.
#include "node/events_complete.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "decode/decode.h"
#include "node/node_metrics.h"
#include "node/range_job.h"
#include "verify/verify.h"

namespace gapless {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return out;
}

// The filter as blooms and as lower-case sets.
struct FilterBlooms {
  std::vector<std::string> address_blooms;  // empty: any address
  std::vector<std::string> topic_blooms;    // empty: any topic
  std::vector<std::string> addresses;       // lower-case
  std::vector<std::string> topic0s;         // lower-case
};

Result<FilterBlooms> MakeFilterBlooms(const LogFilter& filter) {
  FilterBlooms out;
  for (const std::string& a : filter.addresses) {
    GAPLESS_ASSIGN_OR_RETURN(std::string bloom, ComputeValueBloom(a));
    out.address_blooms.push_back(std::move(bloom));
    out.addresses.push_back(Lower(a));
  }
  for (const std::string& t : filter.topic0s) {
    GAPLESS_ASSIGN_OR_RETURN(std::string bloom, ComputeValueBloom(t));
    out.topic_blooms.push_back(std::move(bloom));
    out.topic0s.push_back(Lower(t));
  }
  return out;
}

// True when the block's logsBloom may hold a log the filter matches: one of the addresses and
// (with topic0s) one of the topics; with neither, any log at all (a bloom not all zero).
bool BloomAdmitsFilter(const FilterBlooms& f, std::string_view bloom) {
  auto any = [&](const std::vector<std::string>& blooms) {
    return std::any_of(blooms.begin(), blooms.end(),
                       [&](const std::string& b) { return BloomContains(bloom, b); });
  };
  if (f.address_blooms.empty() && f.topic_blooms.empty()) {
    return bloom.size() > 2 && bloom.find_first_not_of('0', 2) != std::string_view::npos;
  }
  return (f.address_blooms.empty() || any(f.address_blooms)) &&
         (f.topic_blooms.empty() || any(f.topic_blooms));
}

bool Matches(const FilterBlooms& f, const Log& log) {
  if (!f.addresses.empty() &&
      std::find(f.addresses.begin(), f.addresses.end(), Lower(log.address)) == f.addresses.end()) {
    return false;
  }
  if (f.topic0s.empty()) return true;
  return !log.topics.empty() &&
         std::find(f.topic0s.begin(), f.topic0s.end(), Lower(log.topics[0])) != f.topic0s.end();
}

// What differs between the log the receipts hold and eth_getLogs's of the same index, or "".
std::string Difference(const Log& proven, const Log& answered) {
  if (Lower(proven.address) != Lower(answered.address)) return "address";
  if (proven.topics.size() != answered.topics.size()) return "topics";
  for (size_t i = 0; i < proven.topics.size(); ++i) {
    if (Lower(proven.topics[i]) != Lower(answered.topics[i])) return "topics";
  }
  if (Lower(proven.data) != Lower(answered.data)) return "data";
  if (Lower(proven.transaction_hash) != Lower(answered.transaction_hash)) {
    return "transactionHash";
  }
  if (proven.transaction_index != answered.transaction_index) return "transactionIndex";
  return "";
}

// The first disagreement between the proven matching logs and eth_getLogs's, as a message, or "".
std::string CompareLogs(uint64_t number, const std::vector<const Log*>& proven,
                        const std::vector<Log>& answered) {
  std::map<uint64_t, const Log*> by_index;
  for (const Log& log : answered) by_index[log.log_index] = &log;
  size_t missing = 0;
  std::string first_missing;
  for (const Log* log : proven) {
    auto it = by_index.find(log->log_index);
    if (it == by_index.end()) {
      if (missing++ == 0) {
        first_missing = fmt::format(
            "log {} (address {}, topic0 {}, transaction {})", log->log_index, log->address,
            log->topics.empty() ? "none" : log->topics[0], log->transaction_hash);
      }
      continue;
    }
    const std::string field = Difference(*log, *it->second);
    if (!field.empty()) {
      return fmt::format(
          "block {}: eth_getLogs's log {} differs from the block's receipts in field \"{}\" "
          "(verify-complete)",
          number, log->log_index, field);
    }
    by_index.erase(it);
  }
  if (missing > 0) {
    return fmt::format(
        "block {}: eth_getLogs left out {} matching log(s) the block's receipts hold, the first "
        "{} (verify-complete)",
        number, missing, first_missing);
  }
  if (!by_index.empty()) {
    return fmt::format(
        "block {}: eth_getLogs gave {} log(s) the block's receipts do not hold as matching, the "
        "first log {} (verify-complete)",
        number, by_index.size(), by_index.begin()->first);
  }
  return "";
}

Status Incomplete(std::string message) {
  return InvalidData(std::move(message)).WithReason(std::string(kEventsIncompleteReason));
}

Status Mismatch(std::string message) {
  return InvalidData(std::move(message)).WithReason(std::string(kVerifyMismatchReason));
}

// A proof Ethereum's rules do not cover (verify's FailedPrecondition): said once, not failed.
void WarnUnprovable(const Status& st) {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) {
    spdlog::warn("{}; --verify-complete compares such blocks' logs unproven (docs/contracts.md)",
                 st.ToString());
  }
}

}  // namespace

Status CheckEventsComplete(BlockSource& source, const LogFilter& filter,
                           std::span<const Block> headers, std::span<const BlockData> stored,
                           uint64_t logs_served_by, uint32_t per_request, RateLimiter* limiter,
                           const std::atomic<bool>* stop) {
  JsonRpcClient* rpc = source.rpc();
  if (rpc == nullptr) return Internal("CheckEventsComplete without a JSON-RPC client");
  GAPLESS_ASSIGN_OR_RETURN(FilterBlooms f, MakeFilterBlooms(filter));
  std::map<uint64_t, const std::vector<Log>*> answered;
  for (const BlockData& b : stored) answered[b.block.number] = &b.logs;

  // The headers: each its hash's, and its bloom tested.
  std::vector<const Block*> admitted;
  for (const Block& header : headers) {
    Result<std::string> hash = ComputeBlockHash(header);
    if (!hash.ok()) {
      if (hash.status().code() != Code::kFailedPrecondition) {
        return hash.status().WithContext(fmt::format("block {}", header.number));
      }
      WarnUnprovable(hash.status());
    } else if (Lower(*hash) != Lower(header.hash)) {
      return Mismatch(fmt::format("block {}: hash is {} but the header gives {} (verify-complete)",
                                  header.number, header.hash, *hash));
    }
    if (BloomAdmitsFilter(f, header.logs_bloom) || answered.count(header.number) != 0) {
      admitted.push_back(&header);
    }
  }

  CountCompletenessCheck(headers.size(), 0);

  // The admitted blocks' receipts, proven, their matching logs compared.
  const std::vector<Log> none;
  const size_t step = std::max<uint32_t>(1, per_request);
  for (size_t i = 0; i < admitted.size(); i += step) {
    if (stop != nullptr && stop->load()) return Interrupted();
    const size_t end = std::min(admitted.size(), i + step);
    std::vector<uint64_t> numbers;
    for (size_t j = i; j < end; ++j) numbers.push_back(admitted[j]->number);
    if (limiter != nullptr) GAPLESS_RETURN_IF_ERROR(limiter->Acquire());
    std::vector<uint64_t> served_by;
    GAPLESS_ASSIGN_OR_RETURN(std::vector<std::string> answers,
                             rpc->FetchBlockReceipts(numbers, &served_by));
    CountCompletenessCheck(0, answers.size());
    for (size_t k = 0; k < answers.size(); ++k) {
      const Block& header = *admitted[i + k];
      const std::string context = fmt::format("block {}", header.number);
      Result<BlockData> receipts = DecodeBlockReceipts(answers[k], header.hash, header.number);
      if (!receipts.ok()) {
        if (receipts.status().code() == Code::kInvalidData) source.Distrust(served_by[k]);
        return receipts.status().WithContext(
            fmt::format("the receipts from {}", rpc->DescribeServers(served_by[k])));
      }
      Result<std::string> root = ComputeReceiptsRoot(*receipts);
      if (!root.ok()) {
        if (root.status().code() != Code::kFailedPrecondition) {
          return root.status().WithContext(context);
        }
        WarnUnprovable(root.status());
      } else if (Lower(*root) != Lower(header.receipts_root)) {
        source.Distrust(served_by[k]);
        return Mismatch(fmt::format(
            "block {}: receiptsRoot is {} but the {} receipts eth_getBlockReceipts gave give {} "
            "(verify-complete)",
            header.number, header.receipts_root, receipts->transactions.size(), *root));
      }
      std::vector<const Log*> proven;
      for (const Log& log : receipts->logs) {
        if (Matches(f, log)) proven.push_back(&log);
      }
      auto it = answered.find(header.number);
      const std::string wrong =
          CompareLogs(header.number, proven, it == answered.end() ? none : *it->second);
      if (!wrong.empty()) {
        source.Distrust(logs_served_by);
        return Incomplete(
            fmt::format("{}; eth_getLogs from {}", wrong, rpc->DescribeServers(logs_served_by)));
      }
    }
  }
  spdlog::debug("blocks {}-{}: --verify-complete fetched the receipts of {} of {} blocks",
                headers.empty() ? 0 : headers.front().number,
                headers.empty() ? 0 : headers.back().number, admitted.size(), headers.size());
  return Status::Ok();
}

}  // namespace gapless
