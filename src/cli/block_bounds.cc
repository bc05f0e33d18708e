#include "cli/block_bounds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "cli/input_checks.h"
#include "core/redact.h"

namespace gapless {
namespace {

std::optional<uint64_t> ParseDecimal(const std::string& text) {
  if (text.empty() || !std::all_of(text.begin(), text.end(),
                                   [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return std::nullopt;
  }
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;  // overflow
  return n;
}

}  // namespace

Result<BlockBound> ParseBlockBound(const std::string& text, const std::string& flag) {
  if (auto n = ParseDecimal(text)) return BlockBound{text, n};
  if (text == "latest" || text == "safe" || text == "finalized" || text.rfind("0x", 0) == 0) {
    return BlockBound{text, std::nullopt};
  }
  return FailedPrecondition(fmt::format("{} {}: expected a block number or latest|safe|finalized",
                                        flag, RedactText(text)));
}

Result<std::optional<uint64_t>> ParseUpperBound(const std::string& text) {
  if (text == "max") return std::optional<uint64_t>();
  if (auto n = ParseDecimal(text)) return n;
  return FailedPrecondition(fmt::format("--to {}: expected a block number", RedactText(text)));
}

Status CheckBlockBounds(const CLI::App& sub, const ValueOrigins& origins) {
  const bool upper_bound = sub.get_name() == "verify" || sub.get_name() == "export";
  for (const std::string key : {"from", "to"}) {
    const CLI::Option* opt = sub.get_option_no_throw("--" + key);
    if (opt == nullptr || opt->count() == 0) continue;
    const std::string type = opt->get_type_name();
    if (type.starts_with("UINT") || type.starts_with("INT")) continue;  // CheckNumbers'
    const std::string value = opt->as<std::string>();
    Status st = upper_bound && key == "to" ? ParseUpperBound(value).status()
                                           : ParseBlockBound(value, "--" + key).status();
    if (!st.ok()) return FailedPrecondition(st.message() + OriginSuffix(origins, key));
  }
  return Status::Ok();
}

}  // namespace gapless
