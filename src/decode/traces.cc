#include "decode/traces.h"

#include <simdjson.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "decode/json_fields.h"

namespace gapless {
namespace {

using namespace decode_internal;  // NOLINT(google-build-using-namespace): decode's own helpers

constexpr size_t kMaxDepth = 1100;  // the EVM's call depth limit is 1024

simdjson::dom::parser& Parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

// The element of key in o, or a null-typed "absent" (ok = false).
bool Find(dom::object o, std::string_view key, dom::element* out) {
  return o.at_key(key).get(*out) == simdjson::SUCCESS;
}

Status Where(Status st, const std::string& where) {
  if (st.ok()) return st;
  return InvalidData(where + ": " + st.message());
}

// An address that may be absent or null.
Status OptAddress(dom::object o, std::string_view key, std::optional<std::string>* out) {
  dom::element v;
  if (!Find(o, key, &v)) return Status::Ok();
  return ReadOptHex(v, key, 20, out);
}

Status OptData(dom::object o, std::string_view key, std::optional<std::string>* out) {
  dom::element v;
  if (!Find(o, key, &v)) return Status::Ok();
  return ReadOptHex(v, key, kAnyLength, out);
}

Status OptU256(dom::object o, std::string_view key, std::optional<U256>* out) {
  dom::element v;
  if (!Find(o, key, &v)) return Status::Ok();
  return ReadOptU256(v, key, out);
}

Status OptU64(dom::object o, std::string_view key, std::optional<uint64_t>* out) {
  dom::element v;
  if (!Find(o, key, &v)) return Status::Ok();
  return ReadOptU64(v, key, kBigintMax, out);
}

// A string member, absent/null/empty -> nullopt.
Status OptText(dom::object o, std::string_view key, std::optional<std::string>* out) {
  dom::element v;
  if (!Find(o, key, &v)) return Status::Ok();
  std::string_view text;
  bool is_null = false;
  GAPLESS_RETURN_IF_ERROR(ReadString(v, key, &text, &is_null));
  if (!is_null && !text.empty()) *out = std::string(text);
  return Status::Ok();
}

// A JSON integer, or a hex quantity (nodes differ: Parity sends numbers).
Status ReadNumberOrQuantity(dom::element v, std::string_view field, uint64_t max, uint64_t* out) {
  uint64_t n = 0;
  if (v.get_uint64().get(n) == simdjson::SUCCESS) {
    if (n > max) return FieldError(field, "out of range: " + std::to_string(n));
    *out = n;
    return Status::Ok();
  }
  return ReadU64(v, field, max, out);
}

std::string AddressText(const std::vector<uint32_t>& address) {
  std::string out = "[";
  for (size_t i = 0; i < address.size(); ++i) {
    out += (i > 0 ? "," : "") + std::to_string(address[i]);
  }
  return out + "]";
}

// One element of trace_block's answer.
Status DecodeParityTrace(dom::element e, uint64_t block_number, std::string_view block_hash,
                         Trace* t) {
  dom::object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) {
    return InvalidData(std::string("not an object but ") + JsonTypeName(e.type()));
  }
  dom::element v;
  if (!Find(o, "blockNumber", &v)) return FieldError("blockNumber", "missing");
  GAPLESS_RETURN_IF_ERROR(ReadNumberOrQuantity(v, "blockNumber", kBigintMax, &t->block_number));
  if (t->block_number != block_number) {
    return FieldError("blockNumber", "a trace of block " + std::to_string(t->block_number));
  }
  // The same height on another fork (another endpoint, or the node re-orged between the block
  // and its traces): its top-level frames can match the block's transactions while its internal
  // calls and rewards differ, so the hash decides.
  if (!block_hash.empty() && Find(o, "blockHash", &v) && !v.is_null()) {
    bool equal = false;
    std::string_view text;
    GAPLESS_RETURN_IF_ERROR(ReadHexAndCompare(v, "blockHash", 32, block_hash, &equal, &text));
    if (!equal) {
      return FieldError("blockHash", "a trace of block " + std::string(text) +
                                         " (another fork's), not of " + std::string(block_hash));
    }
  }
  if (!Find(o, "type", &v)) return FieldError("type", "missing");
  std::string_view type;
  GAPLESS_RETURN_IF_ERROR(ReadString(v, "type", &type));
  t->trace_type = std::string(type);
  GAPLESS_RETURN_IF_ERROR(OptData(o, "transactionHash", &t->transaction_hash));
  if (t->transaction_hash.has_value() && t->transaction_hash->size() != 66) {
    return FieldError("transactionHash", "not 32 bytes: " + *t->transaction_hash);
  }
  if (Find(o, "transactionPosition", &v) && !v.is_null()) {
    uint64_t position = 0;
    GAPLESS_RETURN_IF_ERROR(ReadNumberOrQuantity(v, "transactionPosition", UINT32_MAX, &position));
    t->transaction_index = static_cast<uint32_t>(position);
  }
  if (Find(o, "subtraces", &v)) {
    uint64_t n = 0;
    GAPLESS_RETURN_IF_ERROR(ReadNumberOrQuantity(v, "subtraces", UINT32_MAX, &n));
    t->subtraces = static_cast<uint32_t>(n);
  }
  if (Find(o, "traceAddress", &v) && !v.is_null()) {
    dom::array a;
    if (v.get_array().get(a) != simdjson::SUCCESS)
      return FieldError("traceAddress", "not an array");
    for (dom::element i : a) {
      uint64_t n = 0;
      GAPLESS_RETURN_IF_ERROR(ReadNumberOrQuantity(i, "traceAddress", UINT32_MAX, &n));
      t->trace_address.push_back(static_cast<uint32_t>(n));
    }
    if (t->trace_address.size() > kMaxDepth) return FieldError("traceAddress", "too deep");
  }
  GAPLESS_RETURN_IF_ERROR(OptText(o, "error", &t->error));
  dom::object action, result;
  if (!Find(o, "action", &v) || v.get_object().get(action) != simdjson::SUCCESS) {
    return FieldError("action", "missing or not an object");
  }
  const bool has_result = Find(o, "result", &v) && v.get_object().get(result) == simdjson::SUCCESS;
  if (t->trace_type == "call" || t->trace_type == "create") {
    GAPLESS_RETURN_IF_ERROR(OptAddress(action, "from", &t->from_address));
    GAPLESS_RETURN_IF_ERROR(OptU256(action, "value", &t->value));
    GAPLESS_RETURN_IF_ERROR(OptU64(action, "gas", &t->gas));
    if (has_result) GAPLESS_RETURN_IF_ERROR(OptU64(result, "gasUsed", &t->gas_used));
    if (t->trace_type == "call") {
      GAPLESS_RETURN_IF_ERROR(OptText(action, "callType", &t->call_type));
      GAPLESS_RETURN_IF_ERROR(OptAddress(action, "to", &t->to_address));
      GAPLESS_RETURN_IF_ERROR(OptData(action, "input", &t->input));
      if (has_result) GAPLESS_RETURN_IF_ERROR(OptData(result, "output", &t->output));
    } else {
      // Nodes that tell CREATE2 apart (reth, anvil: "creationMethod") get the type the geth
      // path gives it; older answers have no such field and stay "create".
      std::optional<std::string> method;
      GAPLESS_RETURN_IF_ERROR(OptText(action, "creationMethod", &method));
      if (method == "create2") t->trace_type = "create2";
      GAPLESS_RETURN_IF_ERROR(OptData(action, "init", &t->input));
      if (has_result) {
        GAPLESS_RETURN_IF_ERROR(OptAddress(result, "address", &t->to_address));
        GAPLESS_RETURN_IF_ERROR(OptData(result, "code", &t->output));
      }
    }
  } else if (t->trace_type == "suicide") {
    GAPLESS_RETURN_IF_ERROR(OptAddress(action, "address", &t->from_address));
    GAPLESS_RETURN_IF_ERROR(OptAddress(action, "refundAddress", &t->to_address));
    GAPLESS_RETURN_IF_ERROR(OptU256(action, "balance", &t->value));
  } else if (t->trace_type == "reward") {
    GAPLESS_RETURN_IF_ERROR(OptAddress(action, "author", &t->to_address));
    GAPLESS_RETURN_IF_ERROR(OptU256(action, "value", &t->value));
    GAPLESS_RETURN_IF_ERROR(OptText(action, "rewardType", &t->reward_type));
  } else {
    return FieldError("type", "unknown trace type '" + t->trace_type + "'");
  }
  if (t->trace_type != "reward" && !t->transaction_hash.has_value()) {
    return FieldError("transactionHash", "missing on a " + t->trace_type + " trace");
  }
  return Status::Ok();
}

// One geth callTracer frame and, depth first, its calls.
Status DecodeGethFrame(dom::element e, uint64_t block_number, uint32_t tx_index,
                       std::vector<uint32_t>* path, std::vector<Trace>* out) {
  const std::string where =
      "transaction " + std::to_string(tx_index) + " frame " + AddressText(*path);
  dom::object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return InvalidData(where + ": not an object");
  if (path->size() > kMaxDepth) return InvalidData(where + ": the call tree is too deep");
  Trace t;
  t.block_number = block_number;
  t.transaction_index = tx_index;
  t.trace_address = *path;
  auto read = [&]() -> Status {
    dom::element v;
    if (!Find(o, "type", &v)) return FieldError("type", "missing");
    std::string_view type_text;
    GAPLESS_RETURN_IF_ERROR(ReadString(v, "type", &type_text));
    std::string type(type_text);
    std::transform(type.begin(), type.end(), type.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (type == "call" || type == "callcode" || type == "delegatecall" || type == "staticcall") {
      t.trace_type = "call";
      t.call_type = type;
    } else if (type == "selfdestruct") {
      t.trace_type = "suicide";
    } else {
      t.trace_type = type;  // create, create2 (kept apart, as ethereum-etl does)
    }
    GAPLESS_RETURN_IF_ERROR(OptAddress(o, "from", &t.from_address));
    GAPLESS_RETURN_IF_ERROR(OptAddress(o, "to", &t.to_address));
    GAPLESS_RETURN_IF_ERROR(OptU256(o, "value", &t.value));
    GAPLESS_RETURN_IF_ERROR(OptU64(o, "gas", &t.gas));
    GAPLESS_RETURN_IF_ERROR(OptU64(o, "gasUsed", &t.gas_used));
    // A self-destruct has no input (the Parity path has none either; the callTracer writes "0x").
    if (t.trace_type != "suicide") GAPLESS_RETURN_IF_ERROR(OptData(o, "input", &t.input));
    GAPLESS_RETURN_IF_ERROR(OptData(o, "output", &t.output));
    GAPLESS_RETURN_IF_ERROR(OptText(o, "error", &t.error));
    return Status::Ok();
  };
  GAPLESS_RETURN_IF_ERROR(Where(read(), where));
  dom::element calls;
  dom::array children;
  const bool has_calls = Find(o, "calls", &calls) && !calls.is_null();
  if (has_calls && calls.get_array().get(children) != simdjson::SUCCESS) {
    return InvalidData(where + ": field \"calls\": not an array");
  }
  if (has_calls) t.subtraces = static_cast<uint32_t>(children.size());
  out->push_back(std::move(t));
  if (!has_calls) return Status::Ok();
  uint32_t i = 0;
  for (dom::element child : children) {
    path->push_back(i++);
    GAPLESS_RETURN_IF_ERROR(DecodeGethFrame(child, block_number, tx_index, path, out));
    path->pop_back();
  }
  return Status::Ok();
}

// The answer's array (in the thread's parser: valid until its next parse); null is NotFound.
Result<dom::array> ParseList(const std::string& json, const std::string& where) {
  dom::element root;
  if (auto error = Parser().parse(json).get(root); error != simdjson::SUCCESS) {
    return Where(JsonError(error), where);
  }
  if (root.is_null()) return NotFound(where + ": null (no such block yet)");
  dom::array list;
  if (root.get_array().get(list) != simdjson::SUCCESS) {
    return InvalidData(where + ": not an array but " + JsonTypeName(root.type()));
  }
  return list;
}

// Decimal strings of non-negative integers, compared as numbers.
bool DecimalLess(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

}  // namespace

Status ComputeTraceStatusAndIds(std::vector<Trace>* traces, uint64_t block_number) {
  // status: 1 unless it failed; then, shallowest first, a failed parent fails its children.
  std::map<std::pair<std::string, std::vector<uint32_t>>, size_t> by_address;
  std::vector<size_t> order;
  for (size_t i = 0; i < traces->size(); ++i) {
    Trace& t = (*traces)[i];
    t.status = t.error.has_value() ? 0 : 1;
    if (!t.transaction_hash.has_value()) continue;
    by_address[{*t.transaction_hash, t.trace_address}] = i;
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return (*traces)[a].trace_address.size() < (*traces)[b].trace_address.size();
  });
  for (size_t i : order) {
    Trace& t = (*traces)[i];
    if (t.trace_address.empty()) continue;
    std::vector<uint32_t> parent(t.trace_address.begin(), t.trace_address.end() - 1);
    auto it = by_address.find({*t.transaction_hash, parent});
    if (it == by_address.end()) {
      return InvalidData("block " + std::to_string(block_number) + ": the trace " +
                         AddressText(t.trace_address) + " of transaction " + *t.transaction_hash +
                         " has no parent " + AddressText(parent));
    }
    if ((*traces)[it->second].status == 0) t.status = 0;
  }
  // trace_id.
  std::map<std::string, std::vector<size_t>> block_scoped;  // trace_type -> traces
  for (size_t i = 0; i < traces->size(); ++i) {
    Trace& t = (*traces)[i];
    if (t.transaction_hash.has_value()) {
      std::string id = t.trace_type + "_" + *t.transaction_hash + "_";
      for (size_t k = 0; k < t.trace_address.size(); ++k) {
        id += (k > 0 ? "_" : "") + std::to_string(t.trace_address[k]);
      }
      t.trace_id = std::move(id);
    } else {
      block_scoped[t.trace_type].push_back(i);
    }
  }
  for (auto& [type, members] : block_scoped) {
    auto key = [&](size_t i) {
      const Trace& t = (*traces)[i];
      return std::make_tuple(t.reward_type, t.from_address, t.to_address,
                             t.value.has_value() ? t.value->ToDecimal() : std::string());
    };
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      auto ka = key(a), kb = key(b);
      if (std::get<0>(ka) != std::get<0>(kb)) return std::get<0>(ka) < std::get<0>(kb);
      if (std::get<1>(ka) != std::get<1>(kb)) return std::get<1>(ka) < std::get<1>(kb);
      if (std::get<2>(ka) != std::get<2>(kb)) return std::get<2>(ka) < std::get<2>(kb);
      return DecimalLess(std::get<3>(ka), std::get<3>(kb));
    });
    for (size_t n = 0; n < members.size(); ++n) {
      (*traces)[members[n]].trace_id =
          type + "_" + std::to_string(block_number) + "_" + std::to_string(n);
    }
  }
  return Status::Ok();
}

Status CheckTracesAgainstBlock(const BlockData& data) {
  const uint64_t n = data.block.number;
  std::map<std::string, const Trace*> top;  // transaction hash -> its top-level trace
  for (const Trace& t : data.traces) {
    if (!t.transaction_hash.has_value()) continue;  // a reward
    if (!t.trace_address.empty()) continue;
    if (!top.emplace(*t.transaction_hash, &t).second) {
      return InvalidData("block " + std::to_string(n) + ": two top-level traces for transaction " +
                         *t.transaction_hash);
    }
  }
  std::set<std::string> known;
  for (const Transaction& tx : data.transactions) {
    known.insert(tx.hash);
    const std::string where = "block " + std::to_string(n) + ": transaction " +
                              std::to_string(tx.transaction_index) + " (" + tx.hash + "): ";
    auto it = top.find(tx.hash);
    if (it == top.end()) return InvalidData(where + "no top-level trace");
    const Trace& t = *it->second;
    auto mismatch = [&](const std::string& field, const std::string& traced,
                        const std::string& sent) {
      return InvalidData(where + "its trace's " + field + " is " + traced + ", the transaction's " +
                         sent);
    };
    if (t.from_address.has_value() && *t.from_address != tx.from_address) {
      return mismatch("from", *t.from_address, tx.from_address);
    }
    if (t.value.has_value() && !(*t.value == tx.value)) {
      return mismatch("value", t.value->ToDecimal(), tx.value.ToDecimal());
    }
    if (t.input.has_value() && *t.input != tx.input) {
      return mismatch("input", t.input->substr(0, 20) + "...", tx.input.substr(0, 20) + "...");
    }
    const std::optional<std::string>& to =
        tx.to_address.has_value() ? tx.to_address : tx.contract_address;
    const bool created = t.trace_type == "create" || t.trace_type == "create2";
    if (created != !tx.to_address.has_value()) {
      return mismatch("type", t.trace_type, tx.to_address.has_value() ? "a call" : "a creation");
    }
    // A failed creation has no address in its trace.
    if (t.to_address.has_value() && to.has_value() && *t.to_address != *to) {
      return mismatch("to", *t.to_address, *to);
    }
    if (tx.status.has_value() && (*tx.status == 0) != t.error.has_value()) {
      return mismatch("outcome", t.error.has_value() ? "failed (" + *t.error + ")" : "success",
                      *tx.status == 0 ? "receipt status 0" : "receipt status 1");
    }
  }
  for (const auto& [hash, trace] : top) {
    if (!known.count(hash)) {
      return InvalidData("block " + std::to_string(n) + ": a trace of transaction " + hash +
                         ", which the block does not hold");
    }
  }
  return Status::Ok();
}

Result<std::vector<Trace>> DecodeParityTraces(const std::string& result_json, uint64_t block_number,
                                              std::string_view block_hash) {
  const std::string where = "block " + std::to_string(block_number) + ": trace_block";
  GAPLESS_ASSIGN_OR_RETURN(dom::array list, ParseList(result_json, where));
  std::vector<Trace> out;
  out.reserve(list.size());
  size_t position = 0;
  for (dom::element e : list) {
    Trace t;
    GAPLESS_RETURN_IF_ERROR(Where(DecodeParityTrace(e, block_number, block_hash, &t),
                                  where + " trace " + std::to_string(position)));
    out.push_back(std::move(t));
    ++position;
  }
  GAPLESS_RETURN_IF_ERROR(ComputeTraceStatusAndIds(&out, block_number));
  return out;
}

Result<std::vector<Trace>> DecodeGethTraces(const std::string& result_json, uint64_t block_number,
                                            const std::vector<std::string>& tx_hashes) {
  const std::string where = "block " + std::to_string(block_number) + ": the debug tracer's answer";
  GAPLESS_ASSIGN_OR_RETURN(dom::array list, ParseList(result_json, where));
  if (!tx_hashes.empty() && list.size() != tx_hashes.size()) {
    return InvalidData(where + ": " + std::to_string(list.size()) + " traces for " +
                       std::to_string(tx_hashes.size()) + " transactions");
  }
  std::vector<Trace> out;
  uint32_t index = 0;
  for (dom::element entry : list) {
    const std::string at = where + " transaction " + std::to_string(index);
    dom::object o;
    if (entry.get_object().get(o) != simdjson::SUCCESS) return InvalidData(at + ": not an object");
    dom::element v;
    if (!Find(o, "result", &v) || v.is_null()) {
      // A transaction the node could not trace: {"error": "..."} instead of a result.
      std::optional<std::string> error;
      (void)OptText(o, "error", &error);
      return InvalidData(at + ": no trace" + (error.has_value() ? " (" + *error + ")" : ""));
    }
    if (!tx_hashes.empty()) {
      std::optional<std::string> hash;
      GAPLESS_RETURN_IF_ERROR(Where(OptData(o, "txHash", &hash), at));
      if (hash.has_value() && *hash != tx_hashes[index]) {
        return InvalidData(at + ": field \"txHash\": " + *hash + ", but the block's transaction " +
                           std::to_string(index) + " is " + tx_hashes[index]);
      }
    }
    const size_t first = out.size();
    std::vector<uint32_t> path;
    GAPLESS_RETURN_IF_ERROR(Where(DecodeGethFrame(v, block_number, index, &path, &out), where));
    if (!tx_hashes.empty()) {
      for (size_t i = first; i < out.size(); ++i) out[i].transaction_hash = tx_hashes[index];
    }
    ++index;
  }
  if (!tx_hashes.empty()) GAPLESS_RETURN_IF_ERROR(ComputeTraceStatusAndIds(&out, block_number));
  return out;
}

}  // namespace gapless
