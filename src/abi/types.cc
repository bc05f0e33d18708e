// Type strings ("uint256", "tuple[2][]") -> Type, canonical forms, event signatures and topic
// hashes. The size limits of abi.h (kMaxTypeDepth, kMaxTypeValues) are enforced here, so that a
// type that came through ParseType can be decoded without arithmetic overflow.
#include <algorithm>
#include <charconv>
#include <utility>

#include "abi/abi.h"
#include "core/keccak.h"

namespace gapless::abi {
namespace {

Status UnknownType(std::string_view type) {
  return InvalidData("unknown type \"" + std::string(type) + "\"");
}

// Parses the decimal digits of "uint256" or "[12]" into *out: at least one digit, no leading
// zero, no sign. False otherwise or when the number is above `max`.
bool ParseSmallNumber(std::string_view digits, int max, int* out) {
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  if (digits.size() > 9) return false;
  int v = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (v > max) return false;
  *out = v;
  return true;
}

// Depth of array and tuple nesting: 0 for a value type, 1 for uint256[] or (uint256), ...
int Depth(const Type& type) {
  int deepest = 0;
  for (const Type& c : type.components) deepest = std::max(deepest, Depth(c));
  bool nests = type.kind == TypeKind::kArray || type.kind == TypeKind::kFixedArray ||
               type.kind == TypeKind::kTuple;
  return deepest + (nests ? 1 : 0);
}

// The values one value of the type holds through its fixed arrays and tuples, counting the
// elements and not the containers (uint256[4] holds 4, (uint8,bool[2]) 3; a dynamic array counts
// as one: its length is in the data). Saturates at kMaxTypeValues + 1.
int64_t FixedValueCount(const Type& type) {
  constexpr int64_t kCap = kMaxTypeValues + 1;
  switch (type.kind) {
    case TypeKind::kFixedArray: {
      if (type.components.empty() || type.size <= 0) return 0;
      int64_t each = FixedValueCount(type.components[0]);
      if (each > kCap / type.size) return kCap;
      return std::min(kCap, each * type.size);
    }
    case TypeKind::kTuple: {
      int64_t sum = 0;
      for (const Type& c : type.components) sum = std::min(kCap, sum + FixedValueCount(c));
      return sum;
    }
    default:
      return 1;
  }
}

// The base type of a type string (no array suffix). `components` and `names` are used by
// "tuple" only.
Result<Type> ParseBase(std::string_view whole, std::string_view base, std::vector<Type> components,
                       std::vector<std::string> names) {
  Type t;
  if (base == "tuple") {
    if (components.empty()) {
      return InvalidData("type \"tuple\" has no components (an empty tuple is not a valid type)");
    }
    if (names.empty()) names.resize(components.size());
    if (names.size() != components.size()) {
      return InvalidData("type \"tuple\" has " + std::to_string(components.size()) +
                         " components but " + std::to_string(names.size()) + " names");
    }
    t.kind = TypeKind::kTuple;
    t.components = std::move(components);
    t.component_names = std::move(names);
    return t;
  }
  if (!components.empty()) {
    return InvalidData("type \"" + std::string(whole) + "\" is not a tuple but has components");
  }
  auto sized = [&](std::string_view prefix, int* n) {
    return base.size() > prefix.size() && base.substr(0, prefix.size()) == prefix &&
           ParseSmallNumber(base.substr(prefix.size()), 256, n);
  };
  int n = 0;
  if (base == "uint" || base == "int") {
    t.kind = base == "uint" ? TypeKind::kUint : TypeKind::kInt;
    t.bits = 256;
  } else if (sized("uint", &n) || sized("int", &n)) {
    if (n < 8 || n % 8 != 0) return UnknownType(whole);
    t.kind = base[0] == 'u' ? TypeKind::kUint : TypeKind::kInt;
    t.bits = n;
  } else if (base == "address") {
    t.kind = TypeKind::kAddress;
  } else if (base == "bool") {
    t.kind = TypeKind::kBool;
  } else if (base == "byte") {
    t.kind = TypeKind::kFixedBytes;
    t.size = 1;
  } else if (sized("bytes", &n)) {
    if (n < 1 || n > 32) return UnknownType(whole);
    t.kind = TypeKind::kFixedBytes;
    t.size = n;
  } else if (base == "bytes") {
    t.kind = TypeKind::kBytes;
  } else if (base == "string") {
    t.kind = TypeKind::kString;
  } else {
    return UnknownType(whole);
  }
  return t;
}

Result<Type> Parse(std::string_view whole, std::string_view type, std::vector<Type>* components,
                   std::vector<std::string>* names) {
  if (type.empty() || type.back() != ']') {
    return ParseBase(whole, type, std::move(*components), std::move(*names));
  }
  size_t open = type.rfind('[');
  if (open == std::string_view::npos || open == 0) return UnknownType(whole);
  std::string_view inside = type.substr(open + 1, type.size() - open - 2);
  GAPLESS_ASSIGN_OR_RETURN(Type element, Parse(whole, type.substr(0, open), components, names));
  Type t;
  t.components.push_back(std::move(element));
  if (inside.empty()) {
    t.kind = TypeKind::kArray;
    return t;
  }
  int n = 0;
  if (inside.find_first_not_of("0123456789") != std::string_view::npos ||
      (inside.size() > 1 && inside[0] == '0')) {
    return UnknownType(whole);
  }
  if (inside == "0") {
    return InvalidData("type \"" + std::string(whole) + "\": a fixed array of length 0");
  }
  if (!ParseSmallNumber(inside, kMaxTypeValues, &n)) {
    return InvalidData("type \"" + std::string(whole) + "\": a fixed array of " +
                       std::string(inside) + " elements, more than the " +
                       std::to_string(kMaxTypeValues) + " allowed");
  }
  t.kind = TypeKind::kFixedArray;
  t.size = n;
  return t;
}

void AppendCanonical(const Type& type, std::string* out) {
  switch (type.kind) {
    case TypeKind::kUint:
      out->append("uint").append(std::to_string(type.bits));
      return;
    case TypeKind::kInt:
      out->append("int").append(std::to_string(type.bits));
      return;
    case TypeKind::kAddress:
      out->append("address");
      return;
    case TypeKind::kBool:
      out->append("bool");
      return;
    case TypeKind::kFixedBytes:
      out->append("bytes").append(std::to_string(type.size));
      return;
    case TypeKind::kBytes:
      out->append("bytes");
      return;
    case TypeKind::kString:
      out->append("string");
      return;
    case TypeKind::kArray:
    case TypeKind::kFixedArray:
      if (type.components.empty()) {
        out->append("?");
      } else {
        AppendCanonical(type.components[0], out);
      }
      out->push_back('[');
      if (type.kind == TypeKind::kFixedArray) out->append(std::to_string(type.size));
      out->push_back(']');
      return;
    case TypeKind::kTuple:
      out->push_back('(');
      for (size_t i = 0; i < type.components.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendCanonical(type.components[i], out);
      }
      out->push_back(')');
      return;
  }
}

}  // namespace

Result<Type> ParseType(std::string_view type, std::vector<Type> tuple_components,
                       std::vector<std::string> tuple_names) {
  // Bounds Parse's recursion before it starts: one level per array suffix.
  if (std::count(type.begin(), type.end(), '[') > kMaxTypeDepth) {
    return InvalidData("type \"" + std::string(type) + "\" nests arrays more than " +
                       std::to_string(kMaxTypeDepth) + " deep");
  }
  GAPLESS_ASSIGN_OR_RETURN(Type t, Parse(type, type, &tuple_components, &tuple_names));
  if (Depth(t) > kMaxTypeDepth) {
    return InvalidData("type \"" + t.Canonical() + "\" nests arrays and tuples " +
                       std::to_string(Depth(t)) + " deep, more than the " +
                       std::to_string(kMaxTypeDepth) + " allowed");
  }
  if (FixedValueCount(t) > kMaxTypeValues) {
    return InvalidData("type \"" + t.Canonical() + "\" holds more than " +
                       std::to_string(kMaxTypeValues) +
                       " values through its fixed arrays and tuples");
  }
  return t;
}

std::string Type::Canonical() const {
  std::string out;
  AppendCanonical(*this, &out);
  return out;
}

bool Type::IsDynamic() const {
  switch (kind) {
    case TypeKind::kBytes:
    case TypeKind::kString:
    case TypeKind::kArray:
      return true;
    case TypeKind::kFixedArray:
      return !components.empty() && components[0].IsDynamic();
    case TypeKind::kTuple:
      for (const Type& c : components) {
        if (c.IsDynamic()) return true;
      }
      return false;
    default:
      return false;
  }
}

std::string Event::Signature() const {
  std::string out = name;
  out.push_back('(');
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendCanonical(inputs[i].type, &out);
  }
  out.push_back(')');
  return out;
}

std::string Event::Topic0() const {
  Hash32 h = Keccak256(Signature());
  return std::string(reinterpret_cast<const char*>(h.data()), h.size());
}

int Event::TopicCount() const {
  int n = anonymous ? 0 : 1;
  for (const Param& p : inputs) n += p.indexed ? 1 : 0;
  return n;
}

}  // namespace gapless::abi
