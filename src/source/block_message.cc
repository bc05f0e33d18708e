#include "source/block_message.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cctype>
#include <charconv>

#include "rpc/json_rpc.h"

namespace gapless {

namespace od = simdjson::ondemand;

Result<std::string> EncodeBlockMessage(const RawBlock& block) {
  size_t close = block.block_json.find_last_of('}');
  if (close == std::string::npos) {
    return InvalidData(fmt::format("block {}: the block is not a JSON object", block.number));
  }
  std::string_view head(block.block_json.data(), close);
  size_t open = head.find('{');
  if (open == std::string_view::npos) {
    return InvalidData(fmt::format("block {}: the block is not a JSON object", block.number));
  }
  bool empty = head.find_first_not_of(" \t\r\n", open + 1) == std::string_view::npos;
  std::string out;
  out.reserve(close + block.receipts_json.size() + 16);
  out.append(head);
  out.append(empty ? "\"receipts\":" : ",\"receipts\":");
  out.append(block.receipts_json.empty() ? "[]" : block.receipts_json);
  out.push_back('}');
  return out;
}

Result<RawBlock> ParseBlockMessage(std::string value, std::string_view key,
                                   std::string_view where) {
  std::optional<uint64_t> key_number;
  if (!key.empty()) {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), n);
    if (ec != std::errc() || end != key.data() + key.size()) {
      return InvalidData(fmt::format("{}: the message key \"{}\" is not a decimal block number",
                                     where, key.substr(0, 40)));
    }
    key_number = n;
  }
  const std::string block_name =
      key_number ? fmt::format("block {} ({})", *key_number, where) : std::string(where);
  auto bad = [&](std::string_view problem) {
    return InvalidData(fmt::format("{}: {} (docs/kafka-blocks.md)", block_name, problem));
  };
  value.reserve(value.size() + simdjson::SIMDJSON_PADDING);
  thread_local od::parser parser;
  od::document doc;
  od::object obj;
  simdjson::padded_string_view padded(value.data(), value.size(), value.capacity());
  if (auto e = parser.iterate(padded).get(doc); e || (e = doc.get_object().get(obj))) {
    return bad(fmt::format("the message is not a JSON object ({})", simdjson::error_message(e)));
  }
  RawBlock block;
  bool has_number = false, has_receipts = false;
  for (auto field : obj) {
    std::string_view name;
    od::value v;
    if (auto e = field.unescaped_key().get(name); e || (e = field.value().get(v))) {
      return bad(fmt::format("malformed JSON ({})", simdjson::error_message(e)));
    }
    if (name == "number") {
      std::string_view hex;
      if (v.get_string().get(hex) != simdjson::SUCCESS) return bad("\"number\" is not a string");
      Result<uint64_t> n = ParseHexQuantity(hex);
      if (!n.ok())
        return bad(fmt::format("\"number\" {} is not a hex quantity", hex.substr(0, 40)));
      block.number = *n;
      has_number = true;
    } else if (name == "hash") {
      std::string_view hash;
      if (v.get_string().get(hash) != simdjson::SUCCESS) return bad("\"hash\" is not a string");
      block.hash = std::string(hash);
      for (char& c : block.hash) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (name == "receipts") {
      od::array receipts;
      std::string_view raw;
      if (v.get_array().get(receipts) != simdjson::SUCCESS ||
          receipts.raw_json().get(raw) != simdjson::SUCCESS) {
        return bad("\"receipts\" is not an array");
      }
      block.receipts_json.reserve(raw.size() + simdjson::SIMDJSON_PADDING);
      block.receipts_json.assign(raw);
      has_receipts = true;
    }
  }
  if (!has_number) return bad("the block has no \"number\"");
  if (!has_receipts) return bad("the message has no \"receipts\" array");
  if (key_number && *key_number != block.number) {
    return bad(fmt::format("the message key says block {} but the block is {}", *key_number,
                           block.number));
  }
  block.block_json = std::move(value);
  return block;
}

}  // namespace gapless
