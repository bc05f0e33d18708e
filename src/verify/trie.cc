// Merkle-Patricia trie root (see trie.h): sorts the nibble keys once, then builds each node from
// the contiguous run of keys below it.
#include "verify/trie.h"

#include <algorithm>

#include "verify/rlp.h"

namespace gapless::verify {

std::string HexPrefix(std::string_view nibbles, bool leaf) {
  uint8_t flag = leaf ? 2 : 0;
  std::string out;
  out.reserve(nibbles.size() / 2 + 1);
  size_t i = 0;
  if (nibbles.size() % 2 == 1) {
    out.push_back(static_cast<char>((flag + 1) << 4 | nibbles[0]));
    i = 1;
  } else {
    out.push_back(static_cast<char>(flag << 4));
  }
  for (; i < nibbles.size(); i += 2)
    out.push_back(static_cast<char>(nibbles[i] << 4 | nibbles[i + 1]));
  return out;
}

namespace {

struct Entry {
  std::string nibbles;
  std::string_view value;
};

std::string ToNibbles(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto b = static_cast<uint8_t>(c);
    out.push_back(static_cast<char>(b >> 4));
    out.push_back(static_cast<char>(b & 15));
  }
  return out;
}

// Appends a reference to a child node to a parent's payload: the node itself when its encoding
// is under 32 bytes, else its hash as a 32-byte string.
void AppendChildRef(std::string* payload, const std::string& node) {
  if (node.size() < 32) {
    payload->append(node);
  } else {
    RlpAppendBytes(payload, AsBytes(Keccak256(node)));
  }
}

// The encoding of the node holding entries [first, last) (sorted, non-empty) whose first
// `depth` nibbles are consumed by the path above it.
std::string BuildNode(const Entry* first, const Entry* last, size_t depth) {
  std::string payload;
  if (last - first == 1) {
    RlpAppendBytes(&payload, HexPrefix(std::string_view(first->nibbles).substr(depth), true));
    RlpAppendBytes(&payload, first->value);
    return RlpWrapList(payload);
  }
  // Sorted: the common prefix of the first and last keys is common to all.
  const std::string& a = first->nibbles;
  const std::string& b = (last - 1)->nibbles;
  size_t common = depth;
  while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  if (common > depth) {
    RlpAppendBytes(&payload, HexPrefix(std::string_view(a).substr(depth, common - depth), false));
    AppendChildRef(&payload, BuildNode(first, last, common));
    return RlpWrapList(payload);
  }
  // Branch. A key ending here (only the first can, being a prefix of the others) is its value.
  std::string_view branch_value;
  if (first->nibbles.size() == depth) {
    branch_value = first->value;
    ++first;
  }
  for (int nibble = 0; nibble < 16; ++nibble) {
    const Entry* end = first;
    while (end != last && end->nibbles[depth] == nibble) ++end;
    if (end == first) {
      payload.push_back(static_cast<char>(0x80));
    } else {
      AppendChildRef(&payload, BuildNode(first, end, depth + 1));
    }
    first = end;
  }
  RlpAppendBytes(&payload, branch_value);
  return RlpWrapList(payload);
}

Hash32 RootOf(std::vector<Entry> entries) {
  if (entries.empty()) {
    static const Hash32 kEmpty = Keccak256(std::string_view("\x80", 1));
    return kEmpty;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& x, const Entry& y) { return x.nibbles < y.nibbles; });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const Entry& x, const Entry& y) { return x.nibbles == y.nibbles; }),
                entries.end());
  return Keccak256(BuildNode(entries.data(), entries.data() + entries.size(), 0));
}

}  // namespace

Hash32 TrieRoot(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::vector<Entry> nibbled;
  nibbled.reserve(entries.size());
  for (const auto& [key, value] : entries) nibbled.push_back(Entry{ToNibbles(key), value});
  return RootOf(std::move(nibbled));
}

Hash32 OrderedTrieRoot(const std::vector<std::string>& values) {
  std::vector<Entry> nibbled;
  nibbled.reserve(values.size());
  std::string key;
  for (size_t i = 0; i < values.size(); ++i) {
    key.clear();
    RlpAppendUint(&key, i);
    nibbled.push_back(Entry{ToNibbles(key), values[i]});
  }
  return RootOf(std::move(nibbled));
}

}  // namespace gapless::verify
