// Values -> JSON text (ToJson), that text back from JSONB into ToJson's form (NormalizeJson),
// integers -> decimal text (ToDecimal), and the check of what a PostgreSQL TEXT or JSONB string
// accepts (IsStorableText).
#include <simdjson.h>

#include <cstring>

#include "abi/abi.h"
#include "core/text.h"

namespace gapless::abi {
namespace {

// Integers this wide or narrower are JSON numbers: exact in a double and in JavaScript.
constexpr int kMaxNumberBits = 48;

const char kHexDigits[] = "0123456789abcdef";

void AppendHex(std::string_view bytes, std::string* out) {
  out->append("\"0x");
  for (char c : bytes) {
    auto u = static_cast<unsigned char>(c);
    out->push_back(kHexDigits[u >> 4]);
    out->push_back(kHexDigits[u & 0xf]);
  }
  out->push_back('"');
}

bool IsInteger(const Type& type) {
  return type.kind == TypeKind::kUint || type.kind == TypeKind::kInt;
}

// The type of an array's elements, or of a tuple's member i; uint256 when the type does not say
// (a Value and a Type that do not match: the value is still written, integers as strings).
const Type& ElementType(const Type& type, size_t i) {
  static const Type kDefault;
  if (type.kind == TypeKind::kArray || type.kind == TypeKind::kFixedArray) {
    return type.components.empty() ? kDefault : type.components[0];
  }
  if (type.kind == TypeKind::kTuple && i < type.components.size()) return type.components[i];
  return kDefault;
}

// False when a string inside is not storable.
bool Append(const Value& v, const Type& type, std::string* out) {
  switch (v.kind) {
    case Value::Kind::kUint:
    case Value::Kind::kInt:
      if (IsInteger(type) && type.bits <= kMaxNumberBits) {
        out->append(ToDecimal(v));
      } else {
        out->push_back('"');
        out->append(ToDecimal(v));
        out->push_back('"');
      }
      return true;
    case Value::Kind::kBool:
      out->append(v.boolean ? "true" : "false");
      return true;
    case Value::Kind::kAddress:
    case Value::Kind::kFixedBytes:
    case Value::Kind::kBytes:
    case Value::Kind::kTopicHash:
      AppendHex(v.bytes, out);
      return true;
    case Value::Kind::kString:
      if (!IsStorableText(v.bytes)) return false;
      AppendJsonText(v.bytes, out);
      return true;
    case Value::Kind::kArray:
    case Value::Kind::kFixedArray:
      out->push_back('[');
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) out->push_back(',');
        if (!Append(v.items[i], ElementType(type, i), out)) return false;
      }
      out->push_back(']');
      return true;
    case Value::Kind::kTuple:
      out->push_back('{');
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) out->push_back(',');
        bool named = type.kind == TypeKind::kTuple && i < type.component_names.size() &&
                     !type.component_names[i].empty();
        if (named) {
          if (!IsStorableText(type.component_names[i])) return false;
          AppendJsonText(type.component_names[i], out);
        } else {
          out->append("\"arg").append(std::to_string(i)).push_back('"');
        }
        out->push_back(':');
        if (!Append(v.items[i], ElementType(type, i), out)) return false;
      }
      out->push_back('}');
      return true;
  }
  return false;
}

// Normalize's walk: false when `e` does not have the shape of `type`.
bool AppendNormalized(simdjson::dom::element e, const Type& type, std::string* out) {
  std::string_view text;
  switch (type.kind) {
    case TypeKind::kUint:
    case TypeKind::kInt:
      if (type.bits <= kMaxNumberBits) {
        int64_t i = 0;
        uint64_t u = 0;
        if (e.get_int64().get(i) == simdjson::SUCCESS) {
          out->append(std::to_string(i));
        } else if (e.get_uint64().get(u) == simdjson::SUCCESS) {
          out->append(std::to_string(u));
        } else {
          return false;
        }
        return true;
      }
      if (e.get_string().get(text) != simdjson::SUCCESS) return false;
      AppendJsonText(text, out);
      return true;
    case TypeKind::kBool: {
      bool b = false;
      if (e.get_bool().get(b) != simdjson::SUCCESS) return false;
      out->append(b ? "true" : "false");
      return true;
    }
    case TypeKind::kAddress:
    case TypeKind::kFixedBytes:
    case TypeKind::kBytes:
    case TypeKind::kString:
      if (e.get_string().get(text) != simdjson::SUCCESS) return false;
      AppendJsonText(text, out);
      return true;
    case TypeKind::kArray:
    case TypeKind::kFixedArray: {
      simdjson::dom::array items;
      if (e.get_array().get(items) != simdjson::SUCCESS) return false;
      out->push_back('[');
      bool first = true;
      for (simdjson::dom::element item : items) {
        if (!first) out->push_back(',');
        first = false;
        if (!AppendNormalized(item, ElementType(type, 0), out)) return false;
      }
      out->push_back(']');
      return true;
    }
    case TypeKind::kTuple: {
      simdjson::dom::object members;
      if (e.get_object().get(members) != simdjson::SUCCESS) return false;
      out->push_back('{');
      for (size_t i = 0; i < type.components.size(); ++i) {
        if (i > 0) out->push_back(',');
        const bool named = i < type.component_names.size() && !type.component_names[i].empty();
        const std::string key = named ? type.component_names[i] : "arg" + std::to_string(i);
        simdjson::dom::element member;
        if (members[key].get(member) != simdjson::SUCCESS) return false;
        AppendJsonText(key, out);
        out->push_back(':');
        if (!AppendNormalized(member, type.components[i], out)) return false;
      }
      out->push_back('}');
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<std::string> NormalizeJson(std::string_view json, const Type& type) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(simdjson::padded_string(json)).get(root) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  std::string out;
  if (!AppendNormalized(root, type, &out)) return std::nullopt;
  return out;
}

std::optional<std::string> ToJson(const Value& value, const Type& type) {
  std::string out;
  if (!Append(value, type, &out)) return std::nullopt;
  return out;
}

std::string ToDecimal(const Value& value) {
  if (value.negative && !value.magnitude.is_zero()) return "-" + value.magnitude.ToDecimal();
  return value.magnitude.ToDecimal();
}

bool IsStorableText(std::string_view bytes) {
  if (bytes.empty()) return true;
  if (std::memchr(bytes.data(), 0, bytes.size()) != nullptr) return false;
  return simdjson::validate_utf8(bytes.data(), bytes.size());
}

}  // namespace gapless::abi
