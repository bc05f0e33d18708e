// Small text helpers shared by the modules (HTTP header names, hex strings, JSON strings). Pure
// functions.
#pragma once

#include <string>
#include <string_view>

namespace gapless {

// ASCII case-insensitive equality ("0xABcd" == "0xabCD", "Retry-After" == "retry-after").
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Appends `s` as a JSON string: '"' and '\' escaped, control characters as \u00XX, every other
// byte as is (UTF-8 included; the caller checks validity where it matters). decode/ and abi/
// write stored JSON with it. (events/event.h has its own, with \n-style escapes, whose exact
// bytes the event payloads are tested against.)
void AppendJsonText(std::string_view s, std::string* out);

}  // namespace gapless
