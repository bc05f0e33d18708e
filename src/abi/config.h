// config: the contracts config (`--contracts FILE`, YAML) that names the contracts whose events
// gapless decodes into typed tables (issue 36; the format is docs/contracts.md).
//
//   name: dex                      # the PostgreSQL schema the tables go into
//   contracts:
//     - name: weth
//       abi: abis/weth.json        # relative to the config file
//       address: "0xc02a..."       # one address or a list
//       events: [Deposit, Withdrawal]   # names, or full signatures for overloads; all if absent
//       start_block: 100           # optional, and end_block
//     - name: pools
//       abi: abis/pool.json
//       factory: {address: "0x1f98...", event: PoolCreated, parameter: pool, abi: abis/f.json}
//
// `factory` is one mapping or a list of them; its `abi` is optional (the factory's event is looked
// up in the children's ABI when absent). A contract has `address` or `factory`, not both.
//
// Parsing is pure: the YAML text is given, ABI files are read through the caller's FileReader
// (paths already resolved against the config file's folder). Every error is FailedPrecondition
// and one line naming the file, the line and the key: "dex.yaml:7: contracts[1].address:
// \"0x12\" is not a 20-byte address". Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "abi/abi.h"
#include "core/status.h"

namespace gapless::abi {

struct FactorySpec {
  std::string address;  // "0x" + 40 lower-case hex digits
  Event event;          // the factory's event that names a child
  int parameter = 0;    // index in event.inputs of the child's address (an address type)
};

struct ContractSpec {
  std::string name;
  std::string abi_path;                // as written in the config
  std::vector<std::string> addresses;  // "0x" + 40 lower-case hex digits, sorted, unique
  std::vector<FactorySpec> factories;  // empty when addresses is not
  std::optional<uint64_t> start_block;
  std::optional<uint64_t> end_block;
  std::vector<Event> events;  // the selected events, in ABI order
  // Event names that are overloaded in this contract's ABI (two or more events of one name):
  // their tables carry a signature suffix whether or not every overload is selected.
  std::vector<std::string> overloaded_names;
};

struct ContractsConfig {
  std::string path;  // the config file, as given
  std::string name;  // the schema: [a-z_][a-z0-9_]*, at most 63 bytes
  std::vector<ContractSpec> contracts;
};

// Reads a file (an ABI) given its path resolved against the config's folder.
using FileReader = std::function<Result<std::string>(const std::string& path)>;

// Parses the config text. config_path names the file in errors and is the base ABI paths are
// resolved against (its folder). Errors: YAML that does not parse, an unknown or missing key, a
// value of the wrong kind, a name that is not a valid identifier, an address that is not 20
// bytes, an ABI that cannot be read or does not parse, an event not in the ABI (or an ambiguous
// overloaded name), a factory parameter that is not an address input of its event, start_block
// above end_block, two contracts writing one table, a table name longer than 63 bytes.
Result<ContractsConfig> ParseContractsConfig(std::string_view yaml_text,
                                             std::string_view config_path,
                                             const FileReader& read_file);

// Reads the file at path and parses it (the CLI's entry point).
Result<ContractsConfig> LoadContractsConfig(const std::string& path);

}  // namespace gapless::abi
