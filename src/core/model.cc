#include "core/model.h"

namespace gapless {

const char* TokenStandardName(TokenStandard standard) {
  switch (standard) {
    case TokenStandard::kErc20:
      return "erc20";
    case TokenStandard::kErc721:
      return "erc721";
    case TokenStandard::kErc1155:
      return "erc1155";
  }
  return "unknown";
}

bool IsInternalTransfer(const Trace& t) {
  if (t.trace_address.empty() || t.status != 1 || !t.value.has_value() || t.value->is_zero()) {
    return false;
  }
  return t.trace_type == "create" || t.trace_type == "create2" || t.trace_type == "suicide" ||
         (t.trace_type == "call" && t.call_type == "call");
}

}  // namespace gapless
