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

}  // namespace gapless
