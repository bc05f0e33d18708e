// keccak: Keccak-256 (core/keccak.h, shared with abi/) and the byte/hex helpers the rest of
// verify/ shares.
//
// Bytes are held in std::string (a byte buffer, not text). Stateless and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/keccak.h"

namespace gapless::verify {

using gapless::Hash32;
using gapless::Keccak256;

using gapless::AsBytes;
using gapless::HexToBytes;
using gapless::QuantityToBytes;
using gapless::ToHex;

}  // namespace gapless::verify
