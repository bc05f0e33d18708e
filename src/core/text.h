// Small text helpers shared by the modules (HTTP header names, hex strings). Pure functions.
#pragma once

#include <string_view>

namespace gapless {

// ASCII case-insensitive equality ("0xABcd" == "0xabCD", "Retry-After" == "retry-after").
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace gapless
