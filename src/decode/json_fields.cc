#include "decode/json_fields.h"

#include <utility>

#include "core/text.h"

namespace gapless::decode_internal {
namespace {

std::string Quoted(std::string_view field) {
  std::string out = "field \"";
  out.append(field);
  out += "\": ";
  return out;
}

Status HexError(std::string_view field, std::string_view text, HexProblem problem, size_t bytes) {
  return FieldError(field, QuoteForMessage(text) + " " + DescribeHexProblem(problem, text, bytes));
}

Status TooLarge(std::string_view field, std::string_view text, uint64_t max) {
  std::string limit = max == kBigintMax ? "2^63-1 (the BIGINT range)" : std::to_string(max);
  return FieldError(field, QuoteForMessage(text) + " is above " + limit);
}

bool IsHexText(std::string_view s) {
  if (s.size() < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  for (size_t i = 2; i < s.size(); ++i) {
    if (HexValue(s[i]) < 0) return false;
  }
  return true;
}

constexpr int kMaxCompactDepth = 16;

Status AppendCompact(dom::element v, std::string_view field, int depth, std::string* out) {
  if (depth > kMaxCompactDepth) return FieldError(field, "is nested too deeply");
  switch (v.type()) {
    case dom::element_type::ARRAY: {
      out->push_back('[');
      bool first = true;
      for (dom::element element : ArrayOf(v)) {
        if (!first) out->push_back(',');
        first = false;
        GAPLESS_RETURN_IF_ERROR(AppendCompact(element, field, depth + 1, out));
      }
      out->push_back(']');
      return Status::Ok();
    }
    case dom::element_type::OBJECT: {
      out->push_back('{');
      bool first = true;
      for (dom::key_value_pair kv : ObjectOf(v)) {
        if (!first) out->push_back(',');
        first = false;
        AppendJsonText(kv.key, out);
        out->push_back(':');
        GAPLESS_RETURN_IF_ERROR(AppendCompact(kv.value, field, depth + 1, out));
      }
      out->push_back('}');
      return Status::Ok();
    }
    case dom::element_type::STRING: {
      std::string_view s = v.get_string().value_unsafe();
      if (IsHexText(s)) {
        out->append("\"0x");
        for (size_t i = 2; i < s.size(); ++i) {
          char c = s[i];
          out->push_back(c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c);
        }
        out->push_back('"');
      } else {
        AppendJsonText(s, out);
      }
      return Status::Ok();
    }
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      out->append(simdjson::minify(v));
      return Status::Ok();
    case dom::element_type::BOOL:
      out->append(v.get_bool().value_unsafe() ? "true" : "false");
      return Status::Ok();
    case dom::element_type::NULL_VALUE:
      out->append("null");
      return Status::Ok();
  }
  return FieldError(field, "has an unknown JSON type");
}

}  // namespace

Status FieldError(std::string_view field, const std::string& what) {
  return InvalidData(Quoted(field) + what);
}

Status JsonError(simdjson::error_code error) {
  return InvalidData(std::string("invalid JSON (") + simdjson::error_message(error) + ")");
}

const char* JsonTypeName(dom::element_type type) {
  switch (type) {
    case dom::element_type::ARRAY:
      return "array";
    case dom::element_type::OBJECT:
      return "object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      return "number";
    case dom::element_type::STRING:
      return "string";
    case dom::element_type::BOOL:
      return "boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "unknown";
}

Status ReadString(dom::element v, std::string_view field, std::string_view* out, bool* is_null) {
  if (v.is_null()) {
    if (is_null == nullptr) return FieldError(field, "is null");
    *is_null = true;
    return Status::Ok();
  }
  if (!v.is_string()) {
    return FieldError(field,
                      std::string("expected a JSON string, got a ") + JsonTypeName(v.type()));
  }
  if (is_null != nullptr) *is_null = false;
  *out = v.get_string().value_unsafe();
  return Status::Ok();
}

Status ReadHex(dom::element v, std::string_view field, size_t bytes, std::string* out) {
  std::string_view text;
  GAPLESS_RETURN_IF_ERROR(ReadString(v, field, &text));
  HexProblem p = NormalizeHexData(text, bytes, out);
  if (p != HexProblem::kNone) return HexError(field, text, p, bytes);
  return Status::Ok();
}

Status ReadHexAndCompare(dom::element v, std::string_view field, size_t bytes,
                         std::string_view expected, bool* equal, std::string_view* text) {
  GAPLESS_RETURN_IF_ERROR(ReadString(v, field, text));
  HexProblem p = CompareHexData(*text, bytes, expected, equal);
  if (p != HexProblem::kNone) return HexError(field, *text, p, bytes);
  return Status::Ok();
}

namespace {

// An optional field: JSON null resets *out; a string is handed to parse(text, value) with the
// value held in *out (an existing one is reused, so its buffer is).
template <typename T, typename Parse>
Status ReadOptional(dom::element v, std::string_view field, std::optional<T>* out, Parse parse) {
  std::string_view text;
  bool is_null = false;
  GAPLESS_RETURN_IF_ERROR(ReadString(v, field, &text, &is_null));
  if (is_null) {
    out->reset();
    return Status::Ok();
  }
  if (!*out) out->emplace();
  return parse(text, &**out);
}

}  // namespace

Status ReadOptHex(dom::element v, std::string_view field, size_t bytes,
                  std::optional<std::string>* out) {
  return ReadOptional(v, field, out, [&](std::string_view text, std::string* value) {
    HexProblem p = NormalizeHexData(text, bytes, value);
    return p == HexProblem::kNone ? Status::Ok() : HexError(field, text, p, bytes);
  });
}

Status ReadOptQuantityText(dom::element v, std::string_view field,
                           std::optional<std::string>* out) {
  return ReadOptional(v, field, out, [&](std::string_view text, std::string* value) {
    HexProblem p = NormalizeHexQuantity(text, value);
    return p == HexProblem::kNone ? Status::Ok() : HexError(field, text, p, 0);
  });
}

namespace {

Status ParseU64Text(std::string_view field, std::string_view text, uint64_t max, uint64_t* out) {
  uint64_t x = 0;
  HexProblem p = ParseQuantityU64(text, &x);
  if (p == HexProblem::kOverflow) return TooLarge(field, text, max);
  if (p != HexProblem::kNone) return HexError(field, text, p, 0);
  if (x > max) return TooLarge(field, text, max);
  *out = x;
  return Status::Ok();
}

Status ParseU256Text(std::string_view field, std::string_view text, U256* out) {
  HexProblem p = ParseQuantityU256(text, out);
  if (p != HexProblem::kNone) return HexError(field, text, p, 0);
  return Status::Ok();
}

}  // namespace

Status ReadU64(dom::element v, std::string_view field, uint64_t max, uint64_t* out) {
  std::string_view text;
  GAPLESS_RETURN_IF_ERROR(ReadString(v, field, &text));
  return ParseU64Text(field, text, max, out);
}

Status ReadOptU64(dom::element v, std::string_view field, uint64_t max,
                  std::optional<uint64_t>* out) {
  return ReadOptional(v, field, out, [&](std::string_view text, uint64_t* value) {
    return ParseU64Text(field, text, max, value);
  });
}

Status ReadU256(dom::element v, std::string_view field, U256* out) {
  std::string_view text;
  GAPLESS_RETURN_IF_ERROR(ReadString(v, field, &text));
  return ParseU256Text(field, text, out);
}

Status ReadOptU256(dom::element v, std::string_view field, std::optional<U256>* out) {
  return ReadOptional(v, field, out, [&](std::string_view text, U256* value) {
    return ParseU256Text(field, text, value);
  });
}

Status ReadBool(dom::element v, std::string_view field, bool* out) {
  if (v.is_null()) {
    *out = false;
    return Status::Ok();
  }
  if (!v.is_bool()) {
    return FieldError(field,
                      std::string("expected true or false, got a ") + JsonTypeName(v.type()));
  }
  *out = v.get_bool().value_unsafe();
  return Status::Ok();
}

Status ReadOptCompactJsonArray(dom::element v, std::string_view field,
                               std::optional<std::string>* out) {
  if (v.is_null()) {
    out->reset();
    return Status::Ok();
  }
  if (!v.is_array()) {
    return FieldError(field, std::string("expected a JSON array, got a ") + JsonTypeName(v.type()));
  }
  std::string text;
  GAPLESS_RETURN_IF_ERROR(AppendCompact(v, field, 0, &text));
  *out = std::move(text);
  return Status::Ok();
}

Status ReadHashList(dom::element v, std::string_view field, size_t max_entries, bool nullable,
                    std::vector<std::string>* out) {
  out->clear();
  if (nullable && v.is_null()) return Status::Ok();
  if (!v.is_array()) {
    return FieldError(field, std::string("expected a JSON array, got a ") + JsonTypeName(v.type()));
  }
  dom::array array = ArrayOf(v);
  if (array.size() > max_entries) {
    return FieldError(field, "has " + std::to_string(array.size()) + " entries, at most " +
                                 std::to_string(max_entries) + " allowed");
  }
  out->reserve(array.size());
  for (dom::element element : array) {
    std::string_view text;
    out->emplace_back();
    if (!element.get_string().get(text) &&
        NormalizeHexData(text, 32, &out->back()) == HexProblem::kNone) {
      continue;
    }
    // Only on failure: name the entry, e.g. "topics[2]".
    std::string entry = std::string(field) + "[" + std::to_string(out->size() - 1) + "]";
    return ReadHex(element, entry, 32, &out->back());
  }
  return Status::Ok();
}

}  // namespace gapless::decode_internal
