// contracts: what a contract's bytecode and its token methods say about it, the way ethereum-etl
// derives them (issue 18; the rules and the fixtures that check them are in
// ../shared/fixtures/ethereum-etl/TRACES.md, "Contracts and tokens").
//
// AnalyzeBytecode: the function selectors the dispatcher compares against (the operands of the
// PUSH4 instructions before the first JUMPDEST, found by a linear sweep that skips push data),
// sorted and unique, and ERC-20 / ERC-721 detection from them.
//
// ReadTokenMetadata: name, symbol, decimals and total supply from eth_call answers, tolerant of
// the tokens in the wild: a method that reverts, is missing or answers garbage gives nullopt,
// never an error; symbol and name are tried as string, then upper-case SYMBOL()/NAME(), then as
// bytes32 (early tokens such as EOS and MKR return bytes32); NULs are removed; invalid UTF-8
// gives nullopt; decimals must fit uint8.
//
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/u256.h"

namespace gapless {

struct ContractInfo {
  std::vector<std::string> function_sighashes;  // "0x" + 8 lower-case hex digits, sorted
  bool is_erc20 = false;
  bool is_erc721 = false;
};

// bytecode: "0x" + hex (as eth_getCode or a create trace's output gives it); "" or "0x" is no
// code. Bad hex digits end the sweep where they start.
ContractInfo AnalyzeBytecode(std::string_view bytecode);

// The selectors ReadTokenMetadata calls.
inline constexpr std::string_view kSelectorName = "0x06fdde03";           // name()
inline constexpr std::string_view kSelectorNameUpper = "0xa3f4df7e";      // NAME()
inline constexpr std::string_view kSelectorSymbol = "0x95d89b41";         // symbol()
inline constexpr std::string_view kSelectorSymbolUpper = "0xf76f8d78";    // SYMBOL()
inline constexpr std::string_view kSelectorDecimals = "0x313ce567";       // decimals()
inline constexpr std::string_view kSelectorDecimalsUpper = "0x2e0f2625";  // DECIMALS()
inline constexpr std::string_view kSelectorTotalSupply = "0x18160ddd";    // totalSupply()

struct TokenMetadata {
  std::optional<std::string> symbol;
  std::optional<std::string> name;
  std::optional<uint32_t> decimals;  // 0..255
  std::optional<U256> total_supply;
  bool operator==(const TokenMetadata&) const = default;
};

// call(selector): the eth_call answer ("0x..." hex) for that method without arguments, or
// nullopt when the call reverted or failed. Each selector is asked at most once.
TokenMetadata ReadTokenMetadata(
    const std::function<std::optional<std::string>(std::string_view selector)>& call);

// The contracts a decoded block created (issue 18). With traces (data.traces not empty, or the
// block has no transaction): every successful create/create2 trace with an address, bytecode =
// its output, creator = its from, in trace order. Without: every receipt with a contractAddress
// and a status that is not 0, trace_address [], type "create", creator = the sender, bytecode
// unknown (node/enrich.h asks the node). function_sighashes and the ERC flags from the bytecode
// where it is known.
std::vector<Contract> DeriveContracts(const BlockData& data);

// Sets a contract's bytecode and what AnalyzeBytecode says about it.
void SetBytecode(Contract* contract, std::string bytecode);

// ABI decoding of one return value (exposed for tests). nullopt when the data does not decode.
std::optional<std::string> AbiString(std::string_view hex);         // string, NULs removed
std::optional<std::string> AbiBytes32String(std::string_view hex);  // bytes32 as text
std::optional<U256> AbiUint(std::string_view hex, int bits);        // uint<bits>

}  // namespace gapless
