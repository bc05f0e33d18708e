// Lua scripts for RedisConn::Eval (declared in coord/redis.h): the embedded lua/*.lua sources,
// composed with the libraries they name on "-- needs:" lines, stripped of the checks a mutation
// build drops (core/mutation.h), and named by their SHA1 as Redis names them (computed here, so
// EVALSHA needs no round trip to learn it).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <string_view>

#include "coord/redis.h"
#include "core/mutation.h"
#include "lua_scripts.h"

namespace gapless {
namespace {

// SHA1 (FIPS 180-4), enough to name a script the way Redis does without a round trip.
class Sha1 {
 public:
  void Update(std::string_view data) {
    for (unsigned char c : data) {
      block_[block_len_++] = c;
      if (block_len_ == 64) {
        Transform();
        block_len_ = 0;
      }
    }
    total_bits_ += static_cast<uint64_t>(data.size()) * 8;
  }

  std::string HexDigest() {
    uint64_t bits = total_bits_;
    block_[block_len_++] = 0x80;
    if (block_len_ > 56) {
      while (block_len_ < 64) block_[block_len_++] = 0;
      Transform();
      block_len_ = 0;
    }
    while (block_len_ < 56) block_[block_len_++] = 0;
    for (int i = 7; i >= 0; --i) block_[block_len_++] = static_cast<uint8_t>(bits >> (i * 8));
    Transform();
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (uint32_t word : h_) {
      for (int i = 28; i >= 0; i -= 4) out.push_back(kHex[(word >> i) & 0xf]);
    }
    return out;
  }

 private:
  static uint32_t Rol(uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

  void Transform() {
    std::array<uint32_t, 80> w{};
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block_[i * 4]} << 24) | (uint32_t{block_[i * 4 + 1]} << 16) |
             (uint32_t{block_[i * 4 + 2]} << 8) | uint32_t{block_[i * 4 + 3]};
    }
    for (int i = 16; i < 80; ++i) w[i] = Rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4];
    for (int i = 0; i < 80; ++i) {
      uint32_t f, k;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6;
      }
      uint32_t t = Rol(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = Rol(b, 30);
      b = a;
      a = t;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
  }

  std::array<uint32_t, 5> h_{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  std::array<uint8_t, 64> block_{};
  size_t block_len_ = 0;
  uint64_t total_bits_ = 0;
};

}  // namespace

std::string Sha1Hex(std::string_view data) {
  Sha1 sha;
  sha.Update(data);
  return sha.HexDigest();
}

RedisScript::RedisScript(std::string name, std::string source)
    : name_(std::move(name)), source_(std::move(source)), sha1_(Sha1Hex(source_)) {}

namespace {

std::string_view EmbeddedSource(std::string_view file_name) {
  for (const auto& [name, source] : lua::kFiles) {
    if (name == file_name) return source;
  }
  std::fprintf(stderr, "gapless: no embedded Lua script named %.*s (build bug)\n",
               static_cast<int>(file_name.size()), file_name.data());
  std::abort();
}

// The libraries a script names on "-- needs: a.lua b.lua" lines, prepended in that order.
std::string Compose(std::string_view source) {
  std::string libs;
  constexpr std::string_view kNeeds = "-- needs:";
  size_t pos = 0;
  while ((pos = source.find(kNeeds, pos)) != std::string_view::npos) {
    if (pos > 0 && source[pos - 1] != '\n') {
      pos += kNeeds.size();
      continue;
    }
    size_t end = source.find('\n', pos);
    std::string_view line = source.substr(pos + kNeeds.size(), end - pos - kNeeds.size());
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      size_t j = line.find(' ', i);
      if (j == std::string_view::npos) j = line.size();
      if (j > i) libs += std::string(EmbeddedSource(line.substr(i, j - i)));
      i = j;
    }
    pos = end == std::string_view::npos ? source.size() : end;
  }
  return libs + std::string(source);
}

// The checks in lua/*.lua that a mutation switch (core/mutation.h) can drop. Each is a block of
// lines from "-- mutation: NAME" to "-- end mutation: NAME", both markers on lines of their own.
constexpr std::string_view kLuaMutations[] = {"lease-owner", "head-log-height"};

// `text` with every `name` block blanked: its lines, markers included, become empty lines (so a
// Lua runtime error's line numbers stay those of the unmutated script). Adds the number of blocks
// to *dropped. Aborts on a begin marker without its end marker (a build bug).
std::string WithoutCheck(std::string_view script, std::string_view text, std::string_view name,
                         int* dropped) {
  const std::string begin = "-- mutation: " + std::string(name);
  const std::string end = "-- end mutation: " + std::string(name);
  std::string out;
  bool inside = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    std::string_view trimmed = line.substr(std::min(line.find_first_not_of(" \t\r"), line.size()));
    trimmed = trimmed.substr(0, trimmed.find_last_not_of(" \t\r") + 1);
    if (!inside && trimmed == begin) {
      inside = true;
      ++*dropped;
    }
    if (!inside) out += line;
    if (inside && trimmed == end) inside = false;
    if (eol < text.size()) out += '\n';
    pos = eol + 1;
  }
  if (inside) {
    std::fprintf(stderr, "gapless: %.*s: \"%s\" without \"%s\" (build bug)\n",
                 static_cast<int>(script.size()), script.data(), begin.c_str(), end.c_str());
    std::abort();
  }
  return out;
}

}  // namespace

const RedisScript& LoadScript(std::string_view file_name) {
  // Built once; std::deque keeps references stable.
  static const std::deque<RedisScript>* scripts = [] {
    auto* all = new std::deque<RedisScript>();
    int dropped = 0;
    for (const auto& [name, source] : lua::kFiles) {
      std::string text = Compose(source);
      // A mutation build only: elsewhere Mutated is a constant false and the text stays as is.
      for (std::string_view check : kLuaMutations) {
        if (Mutated(check)) text = WithoutCheck(name, text, check, &dropped);
      }
      all->emplace_back(std::string(name), std::move(text));
    }
    for (std::string_view check : kLuaMutations) {
      if (Mutated(check) && dropped == 0) {
        std::fprintf(stderr, "gapless: mutation %.*s: no Lua script marks that check (build bug)\n",
                     static_cast<int>(check.size()), check.data());
        std::abort();
      }
    }
    return all;
  }();
  for (const RedisScript& s : *scripts) {
    if (s.name() == file_name) return s;
  }
  std::fprintf(stderr, "gapless: no embedded Lua script named %.*s (build bug)\n",
               static_cast<int>(file_name.size()), file_name.data());
  std::abort();
}

}  // namespace gapless
