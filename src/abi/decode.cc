// DecodeLog: a log's topics and data -> one Value per event input, strictly (abi.h).
//
// The data is the ABI encoding of the tuple of non-indexed inputs: a head with one slot per
// member (the value itself for a static type, a 32-byte offset for a dynamic one) followed by the
// tails the offsets point at. Offsets count from the start of the enclosing tuple's encoding (for
// a dynamic array, from the word after its length). Every position is checked against the data
// before it is read, every length before anything is allocated for it, and a budget of values
// (kMaxLogValues, kValuesPerDataWord) stops encodings whose offsets alias one tail many times.
// Positions stay at or below data.size() throughout, so the arithmetic cannot overflow.
//
// Error messages are built only on failure; each level prefixes where it was ("element 3: ",
// "member 1 \"memo\" (string): "), DecodeLog the input.
#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "abi/abi.h"

namespace gapless::abi {
namespace {

constexpr size_t kWord = 32;
// A head size that stands for "too large to matter": above any data, far below overflow.
constexpr uint64_t kHugeSize = uint64_t{1} << 62;

std::string Hex(const uint8_t* bytes, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out = "0x";
  out.reserve(2 + 2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 0xf]);
  }
  return out;
}

// The big-endian 64-bit integer at p.
uint64_t Load64(const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (std::endian::native == std::endian::little) v = __builtin_bswap64(v);
  return v;
}

// The bytes of a word taken as a big-endian unsigned integer. U256 takes only a 64-bit value or
// text: the common small values go the first way, the rest through hex digits.
U256 WordToU256(const uint8_t* w) {
  if ((Load64(w) | Load64(w + 8) | Load64(w + 16)) == 0) return U256(Load64(w + 24));
  static const char* kDigits = "0123456789abcdef";
  char digits[2 * kWord];
  for (size_t i = 0; i < kWord; ++i) {
    digits[2 * i] = kDigits[w[i] >> 4];
    digits[2 * i + 1] = kDigits[w[i] & 0xf];
  }
  return *U256::FromHexDigits(std::string_view(digits, sizeof(digits)));
}

// The word as a position or length when it is one that can matter (below 2^64); nullopt else.
std::optional<uint64_t> WordToU64(const uint8_t* w) {
  if ((Load64(w) | Load64(w + 8) | Load64(w + 16)) != 0) return std::nullopt;
  return Load64(w + 24);
}

// True when the n (<= 32) bytes are all `value` (0 or 0xff).
bool AllEqual(const uint8_t* bytes, size_t n, uint8_t value) {
  static const uint8_t kZeros[kWord] = {};
  static const uint8_t kOnes[kWord] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  return std::memcmp(bytes, value == 0 ? kZeros : kOnes, n) == 0;
}

Status Misfit(const Type& type, const uint8_t* w, std::string_view why) {
  return InvalidData("word " + Hex(w, kWord) + " does not fit " + type.Canonical() + " (" +
                     std::string(why) + ")");
}

// Decodes a static value type (uintN, intN, address, bool, bytesN) from its 32-byte word.
Status DecodeWord(const Type& type, const uint8_t* w, Value* out) {
  switch (type.kind) {
    case TypeKind::kUint: {
      if (type.bits < 8 || type.bits > 256 || type.bits % 8 != 0) {
        return InvalidData("type uint" + std::to_string(type.bits) + " has a bad size");
      }
      size_t pad = kWord - static_cast<size_t>(type.bits / 8);
      if (!AllEqual(w, pad, 0)) {
        return Misfit(type, w, "bits above the low " + std::to_string(type.bits) + " are set");
      }
      out->kind = Value::Kind::kUint;
      out->magnitude = WordToU256(w);
      return Status::Ok();
    }
    case TypeKind::kInt: {
      if (type.bits < 8 || type.bits > 256 || type.bits % 8 != 0) {
        return InvalidData("type int" + std::to_string(type.bits) + " has a bad size");
      }
      size_t pad = kWord - static_cast<size_t>(type.bits / 8);
      bool negative = (w[pad] & 0x80) != 0;
      if (!AllEqual(w, pad, negative ? 0xff : 0)) {
        return Misfit(type, w, "not sign-extended from bit " + std::to_string(type.bits - 1));
      }
      out->kind = Value::Kind::kInt;
      out->negative = negative;
      if (!negative) {
        out->magnitude = WordToU256(w);
        return Status::Ok();
      }
      // |v| = ~w + 1 over the whole (sign-extended) word; exact for the minimum, 2^(bits-1).
      uint8_t neg[kWord];
      unsigned carry = 1;
      for (size_t i = kWord; i-- > 0;) {
        unsigned v = static_cast<uint8_t>(~w[i]) + carry;
        neg[i] = static_cast<uint8_t>(v);
        carry = v >> 8;
      }
      out->magnitude = WordToU256(neg);
      return Status::Ok();
    }
    case TypeKind::kAddress:
      if (!AllEqual(w, 12, 0)) return Misfit(type, w, "the high 12 bytes are not zero");
      out->kind = Value::Kind::kAddress;
      out->bytes.assign(reinterpret_cast<const char*>(w + 12), 20);
      return Status::Ok();
    case TypeKind::kBool:
      if (!AllEqual(w, kWord - 1, 0) || w[kWord - 1] > 1) return Misfit(type, w, "not 0 or 1");
      out->kind = Value::Kind::kBool;
      out->boolean = w[kWord - 1] == 1;
      return Status::Ok();
    case TypeKind::kFixedBytes: {
      if (type.size < 1 || type.size > 32) {
        return InvalidData("type bytes" + std::to_string(type.size) + " has a bad size");
      }
      auto n = static_cast<size_t>(type.size);
      if (!AllEqual(w + n, kWord - n, 0)) {
        return Misfit(type, w, "the padding after " + std::to_string(n) + " bytes is not zero");
      }
      out->kind = Value::Kind::kFixedBytes;
      out->bytes.assign(reinterpret_cast<const char*>(w), n);
      return Status::Ok();
    }
    default:
      return Internal("DecodeWord called for " + type.Canonical());
  }
}

// Bytes the type takes in the head of its enclosing tuple: 32 for a dynamic type (its offset),
// its whole encoding for a static one. Saturates at kHugeSize.
uint64_t HeadSize(const Type& type) {
  if (type.IsDynamic()) return kWord;
  switch (type.kind) {
    case TypeKind::kFixedArray: {
      if (type.components.empty() || type.size <= 0) return 0;
      uint64_t each = HeadSize(type.components[0]);
      auto n = static_cast<uint64_t>(type.size);
      return each > kHugeSize / n ? kHugeSize : each * n;
    }
    case TypeKind::kTuple: {
      uint64_t sum = 0;
      for (const Type& c : type.components) sum = std::min(kHugeSize, sum + HeadSize(c));
      return sum;
    }
    default:
      return kWord;
  }
}

// What the enclosing tuple needs to know of a member: whether its head slot holds an offset, and
// the slot's size.
struct Shape {
  bool dynamic;
  uint64_t head;
};

Shape ShapeOf(const Type& type) {
  bool dynamic = type.IsDynamic();
  return Shape{dynamic, dynamic ? kWord : HeadSize(type)};
}

std::string MemberName(size_t i, const Type& tuple) {
  std::string out = "member " + std::to_string(i);
  if (i < tuple.component_names.size() && !tuple.component_names[i].empty()) {
    out += " \"" + tuple.component_names[i] + "\"";
  }
  return out + " (" + tuple.components[i].Canonical() + ")";
}

class Decoder {
 public:
  explicit Decoder(std::string_view data)
      : data_(reinterpret_cast<const uint8_t*>(data.data())),
        size_(data.size()),
        budget_(std::min<int64_t>(
            kMaxLogValues, kValuesPerDataWord * (static_cast<int64_t>(data.size() / kWord) + 1))) {}

  // Decodes the member of type `type` (of the given shape) whose head slot is at *head in the
  // tuple encoded from `base`, and moves *head past the slot.
  Status Member(const Type& type, Shape shape, size_t base, size_t* head, Value* out) {
    if (!shape.dynamic) {
      if (shape.head > size_ - *head) return Short(*head + shape.head);
      size_t at = *head;
      *head += shape.head;
      return At(type, at, out);
    }
    const uint8_t* w = nullptr;
    GAPLESS_RETURN_IF_ERROR(Word(*head, &w));
    std::optional<uint64_t> offset = WordToU64(w);
    if (!offset || *offset > size_ - base) {
      return InvalidData("offset " + (offset ? std::to_string(*offset) : Hex(w, kWord)) +
                         " at byte " + std::to_string(*head) + " (from byte " +
                         std::to_string(base) + ") points past the end of the data (" +
                         std::to_string(size_) + " bytes)");
    }
    *head += kWord;
    return At(type, base + *offset, out);
  }

  // Decodes the value whose encoding starts at pos (pos <= size_).
  Status At(const Type& type, size_t pos, Value* out) {
    GAPLESS_RETURN_IF_ERROR(Spend(1));
    switch (type.kind) {
      case TypeKind::kBytes:
      case TypeKind::kString: {
        uint64_t n = 0;
        GAPLESS_RETURN_IF_ERROR(Length(pos, 1, &n));
        GAPLESS_RETURN_IF_ERROR(Spend(static_cast<int64_t>(n / kWord)));
        out->kind = type.kind == TypeKind::kBytes ? Value::Kind::kBytes : Value::Kind::kString;
        out->bytes.assign(reinterpret_cast<const char*>(data_ + pos + kWord), n);
        return Status::Ok();
      }
      case TypeKind::kArray: {
        if (type.components.size() != 1) return BadType(type);
        uint64_t n = 0;
        GAPLESS_RETURN_IF_ERROR(Length(pos, HeadSize(type.components[0]), &n));
        out->kind = Value::Kind::kArray;
        return Elements(type.components[0], n, pos + kWord, out);
      }
      case TypeKind::kFixedArray:
        if (type.components.size() != 1 || type.size < 0) return BadType(type);
        out->kind = Value::Kind::kFixedArray;
        return Elements(type.components[0], static_cast<uint64_t>(type.size), pos, out);
      case TypeKind::kTuple: {
        if (type.component_names.size() > type.components.size()) return BadType(type);
        out->kind = Value::Kind::kTuple;
        out->items.resize(type.components.size());
        size_t head = pos;
        for (size_t i = 0; i < type.components.size(); ++i) {
          const Type& member = type.components[i];
          Status st = Member(member, ShapeOf(member), pos, &head, &out->items[i]);
          if (!st.ok()) return st.WithContext(MemberName(i, type));
        }
        return Status::Ok();
      }
      default: {
        const uint8_t* w = nullptr;
        GAPLESS_RETURN_IF_ERROR(Word(pos, &w));
        return DecodeWord(type, w, out);
      }
    }
  }

 private:
  Status Short(uint64_t need) const {
    return InvalidData("data holds " + std::to_string(size_) + " bytes, needs " +
                       (need >= kHugeSize ? std::string("more") : std::to_string(need)));
  }

  Status BadType(const Type& type) const {
    return InvalidData("type " + type.Canonical() + " is malformed");
  }

  Status Word(size_t pos, const uint8_t** w) const {
    if (kWord > size_ - pos) return Short(pos + kWord);
    *w = data_ + pos;
    return Status::Ok();
  }

  // Reads the length word at pos of something whose items take `item_size` bytes each after
  // it, and checks that they fit in the data (and, for arrays, the budget) before anything is
  // allocated for them.
  Status Length(size_t pos, uint64_t item_size, uint64_t* n) {
    const uint8_t* w = nullptr;
    GAPLESS_RETURN_IF_ERROR(Word(pos, &w));
    std::optional<uint64_t> length = WordToU64(w);
    uint64_t room = size_ - pos - kWord;
    if (!length || (item_size > 0 && *length > room / item_size)) {
      return InvalidData("length " + (length ? std::to_string(*length) : Hex(w, kWord)) +
                         " at byte " + std::to_string(pos) + " runs past the end of the data (" +
                         std::to_string(room) + " bytes follow it)");
    }
    *n = *length;
    return Status::Ok();
  }

  // n items of `element`, encoded as a tuple from base.
  Status Elements(const Type& element, uint64_t n, size_t base, Value* out) {
    // Each element spends at least one value: refuse before reserving what the budget forbids.
    if (n > static_cast<uint64_t>(budget_)) return OverBudget();
    out->items.resize(static_cast<size_t>(n));
    Shape shape = ShapeOf(element);
    size_t head = base;
    for (size_t i = 0; i < n; ++i) {
      Status st = Member(element, shape, base, &head, &out->items[i]);
      if (!st.ok()) return st.WithContext("element " + std::to_string(i));
    }
    return Status::Ok();
  }

  Status Spend(int64_t n) {
    if (n > budget_) return OverBudget();
    budget_ -= n;
    return Status::Ok();
  }

  Status OverBudget() const {
    return InvalidData("decodes to more values than the limit for " + std::to_string(size_) +
                       " bytes of data (" + std::to_string(kValuesPerDataWord) +
                       " per 32-byte word, at most " + std::to_string(kMaxLogValues) + ")");
  }

  const uint8_t* data_;
  size_t size_;
  int64_t budget_;  // values left to decode
};

std::string InputName(size_t i, const Param& p) {
  std::string out = "input " + std::to_string(i);
  if (!p.name.empty()) out += " \"" + p.name + "\"";
  return out + " (" + p.type.Canonical() + ")";
}

bool IsValueType(TypeKind kind) {
  return kind == TypeKind::kUint || kind == TypeKind::kInt || kind == TypeKind::kAddress ||
         kind == TypeKind::kBool || kind == TypeKind::kFixedBytes;
}

}  // namespace

Result<std::vector<Value>> DecodeLog(const Event& event, const std::vector<std::string>& topics,
                                     std::string_view data) {
  int want = event.TopicCount();
  if (topics.size() != static_cast<size_t>(want)) {
    return InvalidData("the log has " + std::to_string(topics.size()) + " topics, " +
                       event.Signature() + (event.anonymous ? " (anonymous)" : "") + " needs " +
                       std::to_string(want));
  }
  for (size_t t = 0; t < topics.size(); ++t) {
    if (topics[t].size() != kWord) {
      return InvalidData("topic " + std::to_string(t) + " holds " +
                         std::to_string(topics[t].size()) + " bytes, not 32");
    }
  }
  std::vector<Value> out(event.inputs.size());
  Decoder decoder(data);
  size_t topic = event.anonymous ? 0 : 1;
  size_t head = 0;
  bool all_static = true;
  for (size_t i = 0; i < event.inputs.size(); ++i) {
    const Param& p = event.inputs[i];
    Status st;
    if (p.indexed) {
      const std::string& t = topics[topic];
      if (IsValueType(p.type.kind)) {
        st = DecodeWord(p.type, reinterpret_cast<const uint8_t*>(t.data()), &out[i]);
        if (!st.ok()) st = st.WithContext("topic " + std::to_string(topic));
      } else {
        out[i].kind = Value::Kind::kTopicHash;
        out[i].bytes = t;
      }
      ++topic;
    } else {
      Shape shape = ShapeOf(p.type);
      all_static = all_static && !shape.dynamic;
      st = decoder.Member(p.type, shape, 0, &head, &out[i]);
    }
    if (!st.ok()) return st.WithContext(InputName(i, p));
  }
  // A static encoding has one length; bytes beyond it mean the log is not what the ABI says.
  if (all_static && head != data.size()) {
    return InvalidData("data holds " + std::to_string(data.size()) +
                       " bytes, the non-indexed inputs take exactly " + std::to_string(head));
  }
  return out;
}

}  // namespace gapless::abi
