#include "node/mempool.h"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "events/event.h"

namespace gapless {
namespace {

// The strings of a JSON array (eth_getFilterChanges' hashes); InvalidData when it is not one.
Result<std::vector<std::string>> StringArray(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array array;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS ||
      doc.get_array().get(array) != simdjson::SUCCESS) {
    return InvalidData("eth_getFilterChanges: the result is not a JSON array");
  }
  std::vector<std::string> out;
  for (simdjson::dom::element e : array) {
    std::string_view s;
    if (e.get_string().get(s) != simdjson::SUCCESS) {
      return InvalidData("eth_getFilterChanges: an element is not a hash string");
    }
    out.emplace_back(s);
  }
  return out;
}

bool IsHash(const std::string& s) {
  return s.size() == 66 && s.starts_with("0x") &&
         s.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
}

}  // namespace

MempoolWatcher::MempoolWatcher(JsonRpcClient* rpc, std::vector<Publisher*> publishers,
                               MempoolOptions options)
    : rpc_(rpc),
      publishers_(std::move(publishers)),
      options_(std::move(options)),
      unsent_(publishers_.size()) {}

bool MempoolWatcher::FirstSighting(const std::string& hash) {
  if (!seen_.insert(hash).second) return false;
  seen_order_.push_back(hash);
  if (seen_order_.size() > options_.dedup_capacity) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
  return true;
}

Status MempoolWatcher::Step(uint64_t) {
  if (filter_id_.empty()) {
    GAPLESS_ASSIGN_OR_RETURN(std::string id, rpc_->Call("eth_newPendingTransactionFilter", "[]"));
    // The result is a JSON string: "0x...".
    if (id.size() < 3 || id.front() != '"' || id.back() != '"') {
      return InvalidData("eth_newPendingTransactionFilter: the result is not a filter id");
    }
    filter_id_ = id.substr(1, id.size() - 2);
  }
  Result<std::string> changes = rpc_->Call("eth_getFilterChanges", "[\"" + filter_id_ + "\"]");
  if (!changes.ok()) {
    // A filter the node forgot (expired, node restarted): a new one next step.
    if (changes.status().code() != Code::kUnavailable) filter_id_.clear();
    return changes.status().WithContext("mempool");
  }
  GAPLESS_ASSIGN_OR_RETURN(std::vector<std::string> hashes, StringArray(*changes));
  std::vector<std::string> fresh;
  for (std::string& h : hashes) {
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (IsHash(h) && FirstSighting(h)) fresh.push_back(std::move(h));
  }
  if (!fresh.empty()) {
    std::vector<RpcRequest> calls;
    for (const std::string& h : fresh) {
      calls.push_back({"eth_getTransactionByHash", "[\"" + h + "\"]"});
    }
    GAPLESS_ASSIGN_OR_RETURN(auto answers, rpc_->Batch(calls));
    const std::string now =
        IsoTime(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count()));
    for (size_t i = 0; i < fresh.size(); ++i) {
      std::string payload =
          "{\"chain_id\":" + std::to_string(options_.chain_id) + ",\"hash\":\"" + fresh[i] +
          "\",\"transaction\":" + (answers[i].ok() ? *answers[i] : std::string("null")) + "}";
      OutgoingEvent e =
          MakeEvent(options_.chain_id, kTransactionPending,
                    EventId(options_.chain_id, kTransactionPending, fresh[i]), now, payload);
      for (auto& queue : unsent_) queue.push_back(e);
    }
  }
  Status first_error;
  for (size_t p = 0; p < publishers_.size(); ++p) {
    std::deque<OutgoingEvent>& queue = unsent_[p];
    while (queue.size() > options_.max_unsent) {
      queue.pop_front();
      if (++dropped_ % 1000 == 1) {
        spdlog::warn("mempool: {} is not confirming; {} transaction.pending events dropped so far",
                     publishers_[p]->name(), dropped_);
      }
    }
    if (queue.empty()) continue;
    std::vector<OutgoingEvent> batch(queue.begin(), queue.end());
    Status st = publishers_[p]->Publish(batch);
    if (st.ok()) {
      published_ += batch.size();
      queue.clear();
    } else if (first_error.ok()) {
      first_error = st.WithContext("mempool");
    }
  }
  return first_error;
}

}  // namespace gapless
