#include "abi/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "abi/tables.h"

namespace gapless::abi {
namespace {

// ABI JSON as solc writes it, a function among the events (skipped by ParseEvents).
const char* kWethAbi = R"([
  {"type":"function","name":"deposit","inputs":[],"outputs":[],"stateMutability":"payable"},
  {"type":"event","name":"Approval","anonymous":false,"inputs":[
    {"indexed":true,"name":"src","type":"address"},{"indexed":true,"name":"guy","type":"address"},
    {"indexed":false,"name":"wad","type":"uint256"}]},
  {"type":"event","name":"Transfer","anonymous":false,"inputs":[
    {"indexed":true,"name":"src","type":"address"},{"indexed":true,"name":"dst","type":"address"},
    {"indexed":false,"name":"wad","type":"uint256"}]},
  {"type":"event","name":"Deposit","anonymous":false,"inputs":[
    {"indexed":true,"name":"dst","type":"address"},{"indexed":false,"name":"wad","type":"uint256"}]},
  {"type":"event","name":"Withdrawal","anonymous":false,"inputs":[
    {"indexed":true,"name":"src","type":"address"},{"indexed":false,"name":"wad","type":"uint256"}]}
])";

const char* kPoolCreated = R"(
  {"type":"event","name":"PoolCreated","anonymous":false,"inputs":[
    {"indexed":true,"name":"token0","type":"address"},{"indexed":true,"name":"token1","type":"address"},
    {"indexed":true,"name":"fee","type":"uint24"},{"indexed":false,"name":"tickSpacing","type":"int24"},
    {"indexed":false,"name":"pool","type":"address"}]})";

const char* kPoolEvents = R"(
  {"type":"event","name":"Initialize","anonymous":false,"inputs":[
    {"indexed":false,"name":"sqrtPriceX96","type":"uint160"},{"indexed":false,"name":"tick","type":"int24"}]},
  {"type":"event","name":"Swap","anonymous":false,"inputs":[
    {"indexed":true,"name":"sender","type":"address"},{"indexed":true,"name":"recipient","type":"address"},
    {"indexed":false,"name":"amount0","type":"int256"},{"indexed":false,"name":"amount1","type":"int256"},
    {"indexed":false,"name":"sqrtPriceX96","type":"uint160"},{"indexed":false,"name":"liquidity","type":"uint128"},
    {"indexed":false,"name":"tick","type":"int24"}]})";

// Two overloads of Swap and an anonymous event.
const char* kOverloadedAbi = R"({"abi":[
  {"type":"event","name":"Swap","inputs":[
    {"indexed":true,"name":"who","type":"address"},{"indexed":false,"name":"amount","type":"uint256"}]},
  {"type":"event","name":"Swap","inputs":[
    {"indexed":true,"name":"who","type":"address"},{"indexed":false,"name":"amount","type":"int256"}]},
  {"type":"event","name":"Sync","inputs":[
    {"indexed":false,"name":"r0","type":"uint112"},{"indexed":false,"name":"r1","type":"uint112"}]},
  {"type":"event","name":"Secret","anonymous":true,"inputs":[
    {"indexed":false,"name":"who","type":"address"}]}
]})";

constexpr const char* kExample = R"(name: dex
contracts:
  - name: weth
    abi: abis/weth.json
    address: "0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2"
    events: [Deposit, Withdrawal]
  - name: pools
    abi: abis/univ3pool.json
    factory: {address: "0x1f98431c8ad98523631ae4a59f267346ea31f984", event: PoolCreated, parameter: pool}
    start_block: 12369621
)";

constexpr const char* kWeth = "0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2";
constexpr const char* kFactory = "0x1f98431c8ad98523631ae4a59f267346ea31f984";

class ConfigTest : public ::testing::Test {
 protected:
  ConfigTest() {
    // The example names no factory ABI, so its pool ABI must hold PoolCreated too.
    files_["conf/abis/weth.json"] = kWethAbi;
    files_["conf/abis/univ3pool.json"] = std::string("[") + kPoolEvents + "," + kPoolCreated + "]";
    files_["conf/abis/pool.json"] = std::string("[") + kPoolEvents + "]";
    files_["conf/abis/factory.json"] = std::string("[") + kPoolCreated + "]";
    files_["conf/abis/overloaded.json"] = kOverloadedAbi;
  }

  Result<ContractsConfig> Parse(const std::string& yaml) {
    return ParseContractsConfig(yaml, "conf/dex.yaml", [this](const std::string& path) {
      reads_.push_back(path);
      auto it = files_.find(path);
      if (it == files_.end()) return Result<std::string>(NotFound("No such file or directory"));
      return Result<std::string>(it->second);
    });
  }

  // The error is one FailedPrecondition line starting "conf/dex.yaml:{line}: {key}: " and holding
  // `holds`.
  void ExpectError(const std::string& yaml, int line, const std::string& key,
                   const std::string& holds) {
    auto config = Parse(yaml);
    ASSERT_FALSE(config.ok()) << yaml;
    const std::string& message = config.status().message();
    EXPECT_EQ(config.status().code(), Code::kFailedPrecondition) << message;
    const std::string prefix =
        "conf/dex.yaml:" + std::to_string(line) + ": " + (key.empty() ? "" : key + ": ");
    EXPECT_EQ(message.substr(0, prefix.size()), prefix) << message;
    EXPECT_NE(message.find(holds), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }

  // A config with one contract whose lines after "  - name: c" are `body` (line 4 on).
  static std::string One(const std::string& body) {
    return "name: dex\ncontracts:\n  - name: c\n" + body;
  }

  std::map<std::string, std::string> files_;
  std::vector<std::string> reads_;
};

TEST_F(ConfigTest, TheExampleParses) {
  auto config = Parse(kExample);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->path, "conf/dex.yaml");
  EXPECT_EQ(config->name, "dex");
  ASSERT_EQ(config->contracts.size(), 2u);

  const ContractSpec& weth = config->contracts[0];
  EXPECT_EQ(weth.name, "weth");
  EXPECT_EQ(weth.abi_path, "abis/weth.json");
  EXPECT_EQ(weth.addresses, std::vector<std::string>{kWeth});
  EXPECT_TRUE(weth.factories.empty());
  EXPECT_FALSE(weth.start_block.has_value());
  ASSERT_EQ(weth.events.size(), 2u);
  EXPECT_EQ(weth.events[0].Signature(), "Deposit(address,uint256)");
  EXPECT_EQ(weth.events[1].Signature(), "Withdrawal(address,uint256)");
  EXPECT_TRUE(weth.overloaded_names.empty());

  const ContractSpec& pools = config->contracts[1];
  EXPECT_TRUE(pools.addresses.empty());
  ASSERT_EQ(pools.factories.size(), 1u);
  EXPECT_EQ(pools.factories[0].address, kFactory);
  EXPECT_EQ(pools.factories[0].event.name, "PoolCreated");
  EXPECT_EQ(pools.factories[0].parameter, 4);
  EXPECT_EQ(pools.start_block, 12369621u);
  EXPECT_FALSE(pools.end_block.has_value());
  ASSERT_EQ(pools.events.size(), 3u);  // every event of the ABI, in its order

  std::vector<std::string> tables;
  for (const EventTable& t : PlanTables(*config)) tables.push_back(t.schema + "." + t.table);
  EXPECT_EQ(tables, (std::vector<std::string>{"dex.weth_deposit", "dex.weth_withdrawal",
                                              "dex.pools_initialize", "dex.pools_swap",
                                              "dex.pools_pool_created"}));
}

TEST_F(ConfigTest, EventsKeepAbiOrderAndAreSelectedOnce) {
  auto config = Parse(One(
      "    abi: abis/weth.json\n    address: \"" + std::string(kWeth) +
      "\"\n    events:\n      - Withdrawal\n      - Deposit\n      - Deposit(address,uint256)\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->contracts[0].events.size(), 2u);
  EXPECT_EQ(config->contracts[0].events[0].name, "Deposit");
  EXPECT_EQ(config->contracts[0].events[1].name, "Withdrawal");

  config = Parse(One("    abi: abis/weth.json\n    address: \"" + std::string(kWeth) +
                     "\"\n    events: Deposit\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->contracts[0].events.size(), 1u);
}

TEST_F(ConfigTest, AddressesAreLowerCasedSortedAndUnique) {
  // No EIP-55 checksum check: this mixed case is not the checksummed form, and is taken.
  auto config =
      Parse(One("    abi: abis/weth.json\n    address:\n"
                "      - \"0xC02AAA39B223FE8D0A0E5C4F27EAD9083C756CC2\"\n"
                "      - 0x1f98431C8aD98523631AE4a59f267346ea31F984\n"
                "      - \"0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2\"\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->contracts[0].addresses, (std::vector<std::string>{kFactory, kWeth}));
}

TEST_F(ConfigTest, FactoryWithItsOwnAbi) {
  auto config = Parse(
      One("    abi: abis/pool.json\n"
          "    factory:\n      address: \"" +
          std::string(kFactory) +
          "\"\n      event: PoolCreated\n      parameter: pool\n      abi: abis/factory.json\n"
          "    events: [Swap]\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ContractSpec& c = config->contracts[0];
  ASSERT_EQ(c.factories.size(), 1u);
  EXPECT_EQ(c.factories[0].event.Signature(), "PoolCreated(address,address,uint24,int24,address)");
  EXPECT_EQ(c.factories[0].parameter, 4);
  EXPECT_EQ(c.abi_path, "abis/pool.json");

  // Without it, the event is looked up in the pool's ABI, which lacks it.
  ExpectError(One("    abi: abis/pool.json\n"
                  "    factory: {address: \"" +
                  std::string(kFactory) + "\", event: PoolCreated, parameter: pool}\n"),
              5, "contracts[0].factory.event",
              "give the factory's own ABI as contracts[0].factory.abi");
}

TEST_F(ConfigTest, ListOfFactoriesAndParameterByIndex) {
  auto config = Parse(
      One("    abi: abis/pool.json\n    factory:\n"
          "      - {address: \"" +
          std::string(kFactory) +
          "\", event: PoolCreated, parameter: pool, abi: abis/factory.json}\n"
          "      - {address: \"" +
          std::string(kWeth) +
          "\", event: \"PoolCreated(address,address,uint24,int24,address)\", parameter: 1, abi: "
          "abis/factory.json}\n"
          "      - {address: \"" +
          std::string(kFactory) +
          "\", event: PoolCreated, parameter: pool, abi: abis/factory.json}\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ContractSpec& c = config->contracts[0];
  ASSERT_EQ(c.factories.size(), 2u);  // the third repeats the first
  EXPECT_EQ(c.factories[0].address, kFactory);
  EXPECT_EQ(c.factories[0].parameter, 4);
  EXPECT_EQ(c.factories[1].address, kWeth);
  EXPECT_EQ(c.factories[1].parameter, 1);
  // factory.json was read once for three factories.
  EXPECT_EQ(std::count(reads_.begin(), reads_.end(), "conf/abis/factory.json"), 1);
}

TEST_F(ConfigTest, OverloadedEventsBySignature) {
  auto config = Parse(One("    abi: abis/overloaded.json\n    address: \"" + std::string(kWeth) +
                          "\"\n    events:\n      - \"Swap(address, int256)\"\n      - Sync\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ContractSpec& c = config->contracts[0];
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0].Signature(), "Swap(address,int256)");
  EXPECT_EQ(c.overloaded_names, std::vector<std::string>{"Swap"});
  auto tables = PlanTables(*config);
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].table.rfind("c_swap_", 0), 0u);
  EXPECT_EQ(tables[1].table, "c_sync");

  ExpectError(One("    abi: abis/overloaded.json\n    address: \"" + std::string(kWeth) +
                  "\"\n    events: [Sync, Swap]\n"),
              6, "contracts[0].events[1]",
              "\"Swap\" is overloaded in abis/overloaded.json; give the full signature: "
              "Swap(address,uint256) or Swap(address,int256)");
  // Unquoted in a flow list, the signature's comma splits it.
  ExpectError(One("    abi: abis/overloaded.json\n    address: \"" + std::string(kWeth) +
                  "\"\n    events: [Swap(address,int256)]\n"),
              6, "contracts[0].events[0]", "quote a signature");
  ExpectError(One("    abi: abis/overloaded.json\n    address: \"" + std::string(kWeth) +
                  "\"\n    events: [\"Swap(address,int8)\"]\n"),
              6, "contracts[0].events[0]",
              "its Swap events: Swap(address,uint256) or Swap(address,int256)");
}

TEST_F(ConfigTest, EveryAbiEventWhenEventsIsAbsent) {
  auto config =
      Parse(One("    abi: abis/overloaded.json\n    address: \"" + std::string(kWeth) + "\"\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->contracts[0].events.size(), 4u);
  EXPECT_TRUE(config->contracts[0].events[3].anonymous);
}

TEST_F(ConfigTest, ContractNamesAnyCaseAndSchemaChecks) {
  auto config = Parse(
      "name: my_dex2\ncontracts:\n  - name: WETH\n    abi: abis/weth.json\n"
      "    address: \"" +
      std::string(kWeth) + "\"\n    events: [Deposit]\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->contracts[0].name, "WETH");
  EXPECT_EQ(PlanTables(*config).at(0).table, "weth_deposit");
}

TEST_F(ConfigTest, AnExactDuplicateAbiEntryIsDropped) {
  files_["conf/abis/weth.json"] = std::string(kWethAbi).insert(
      1, R"({"type":"event","name":"Deposit","anonymous":false,"inputs":[
    {"indexed":true,"name":"dst","type":"address"},{"indexed":false,"name":"wad","type":"uint256"}]},)");
  auto config =
      Parse(One("    abi: abis/weth.json\n    address: \"" + std::string(kWeth) + "\"\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->contracts[0].events.size(), 4u);
  EXPECT_TRUE(config->contracts[0].overloaded_names.empty());
}

// Each error: one line naming file, line and key.

TEST_F(ConfigTest, YamlThatDoesNotParse) {
  ExpectError("name: dex\ncontracts: [a\n", 3, "", "not valid YAML");
  ExpectError("", 1, "", "empty");
  ExpectError("- a\n", 1, "", "expected a mapping with name and contracts, not a list");
}

TEST_F(ConfigTest, UnknownDuplicateAndEmptyKeys) {
  ExpectError("name: dex\nchain: 1\ncontracts: []\n", 2, "chain", "unknown key");
  ExpectError(
      One("    abi: abis/weth.json\n    adress: x\n"), 5, "contracts[0].adress",
      "unknown key (expected name, abi, address, factory, start_block, end_block or events)");
  ExpectError(One("    abi: abis/pool.json\n    factory: {address: \"" + std::string(kFactory) +
                  "\", event: PoolCreated, parameter: pool, abi: abis/factory.json, "
                  "child: x}\n"),
              5, "contracts[0].factory.child", "unknown key");
  ExpectError("name: dex\nname: dex2\ncontracts: []\n", 2, "name", "given twice (also on line 1)");
  ExpectError(One("    abi: abis/weth.json\n    address: \"" + std::string(kWeth) +
                  "\"\n    start_block:\n"),
              6, "contracts[0].start_block", "has no value");
}

TEST_F(ConfigTest, MissingKeys) {
  ExpectError("contracts: []\n", 1, "name", "missing");
  ExpectError("name: dex\n", 1, "contracts", "missing");
  ExpectError("name: dex\ncontracts: []\n", 2, "contracts", "an empty list");
  ExpectError("name: dex\ncontracts:\n  - abi: abis/weth.json\n    address: \"" +
                  std::string(kWeth) + "\"\n",
              3, "contracts[0].name", "missing");
  ExpectError(One("    address: \"" + std::string(kWeth) + "\"\n"), 3, "contracts[0].abi",
              "missing");
  ExpectError(One("    abi: abis/pool.json\n    factory: {address: \"" + std::string(kFactory) +
                  "\", parameter: pool}\n"),
              5, "contracts[0].factory.event", "missing");
}

TEST_F(ConfigTest, AddressOrFactoryNotBothNorNeither) {
  ExpectError(One("    abi: abis/univ3pool.json\n    address: \"" + std::string(kWeth) +
                  "\"\n    factory: {address: \"" + std::string(kFactory) +
                  "\", event: PoolCreated, parameter: pool}\n"),
              6, "contracts[0]", "has both address and factory");
  ExpectError(One("    abi: abis/weth.json\n"), 3, "contracts[0]",
              "has neither address nor factory");
}

TEST_F(ConfigTest, AddressesThatAreNot20Bytes) {
  const std::string kDex =
      "name: dex\ncontracts:\n  - name: weth\n    abi: abis/weth.json\n    address: \"" +
      std::string(kWeth) + "\"\n  - name: other\n    abi: abis/weth.json\n";
  // The issue's example line.
  auto config = Parse(kDex + "    address: \"0x12\"\n");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "conf/dex.yaml:8: contracts[1].address: \"0x12\" is not a 20-byte address (\"0x\" and "
            "40 hex digits)");
  ExpectError(kDex + "    address:\n      - \"" + std::string(kWeth) + "\"\n      - \"0x" +
                  std::string(40, 'g') + "\"\n",
              10, "contracts[1].address[1]", "is not a 20-byte address");
  ExpectError(kDex + "    address: \"c02aaa39b223fe8d0a0e5c4f27ead9083c756cc2ab\"\n", 8,
              "contracts[1].address", "is not a 20-byte address");
  ExpectError(kDex + "    address: []\n", 8, "contracts[1].address", "an empty list");
  ExpectError(kDex + "    address: {a: b}\n", 8, "contracts[1].address",
              "expected an address or a list of them, not a mapping");
  ExpectError(One("    abi: abis/pool.json\n    factory: {address: \"0x1\", event: PoolCreated, "
                  "parameter: pool, abi: abis/factory.json}\n"),
              5, "contracts[0].factory.address", "\"0x1\" is not a 20-byte address");
}

TEST_F(ConfigTest, LongValuesAreCut) {
  const std::string long_value(500, 'z');
  auto config = Parse(One("    abi: abis/weth.json\n    address: \"0x" + long_value + "\"\n"));
  ASSERT_FALSE(config.ok());
  const std::string& message = config.status().message();
  EXPECT_LT(message.size(), 200u) << message;
  EXPECT_NE(message.find("zzz...\" is not a 20-byte address"), std::string::npos) << message;
  // A multi-line value stays on one line.
  ExpectError(One("    abi: abis/weth.json\n    address: \"0x1\\n2\"\n"), 5, "contracts[0].address",
              "\"0x1\\x0a2\"");
}

TEST_F(ConfigTest, AbisThatCannotBeReadOrParsedOrHaveNoEvents) {
  files_["conf/abis/bad.json"] = "[{\"type\":\"event\",";
  files_["conf/abis/none.json"] = R"([{"type":"function","name":"f","inputs":[],"outputs":[]}])";
  const std::string address = "    address: \"" + std::string(kWeth) + "\"\n";
  ExpectError(One("    abi: abis/bad.json\n" + address), 4, "contracts[0].abi",
              "\"abis/bad.json\" is not an ABI: ");
  ExpectError(One("    abi: abis/none.json\n" + address), 4, "contracts[0].abi",
              "\"abis/none.json\" has no events");
  ExpectError(One("    abi: abis/missing.json\n" + address), 4, "contracts[0].abi",
              "cannot read \"conf/abis/missing.json\": No such file or directory");
  ExpectError(One("    abi: abis/pool.json\n    factory: {address: \"" + std::string(kFactory) +
                  "\", event: PoolCreated, parameter: pool, abi: abis/bad.json}\n"),
              5, "contracts[0].factory.abi", "is not an ABI");
}

TEST_F(ConfigTest, EventsNotInTheAbiOrEmpty) {
  const std::string head = "    abi: abis/weth.json\n    address: \"" + std::string(kWeth) + "\"\n";
  ExpectError(One(head + "    events: [Deposit, Swap]\n"), 6, "contracts[0].events[1]",
              "\"Swap\" is not an event of abis/weth.json (its events: Approval, Transfer, "
              "Deposit or Withdrawal)");
  ExpectError(One(head + "    events: []\n"), 6, "contracts[0].events", "an empty list");
  ExpectError(One(head + "    events:\n      - Deposit\n      - [x]\n"), 8,
              "contracts[0].events[1]", "not a list");
}

TEST_F(ConfigTest, IndistinguishableEventsOfOneSignature) {
  // Transfer as ERC-20 and as ERC-721 declare it: one topic 0, different indexed flags.
  files_["conf/abis/both.json"] = R"([
  {"type":"event","name":"Transfer","inputs":[{"indexed":true,"name":"from","type":"address"},
    {"indexed":true,"name":"to","type":"address"},{"indexed":false,"name":"value","type":"uint256"}]},
  {"type":"event","name":"Transfer","inputs":[{"indexed":true,"name":"from","type":"address"},
    {"indexed":true,"name":"to","type":"address"},{"indexed":true,"name":"id","type":"uint256"}]}])";
  const std::string head = "    abi: abis/both.json\n    address: \"" + std::string(kWeth) + "\"\n";
  ExpectError(One(head), 4, "contracts[0].abi", "declares Transfer(address,address,uint256) twice");
  ExpectError(One(head + "    events: [Transfer]\n"), 6, "contracts[0].events[0]",
              "declares Transfer(address,address,uint256) twice");
}

TEST_F(ConfigTest, NamesThatAreNotIdentifiers) {
  const std::string rest = "contracts:\n  - name: c\n    abi: abis/weth.json\n    address: \"" +
                           std::string(kWeth) + "\"\n";
  for (const char* bad : {"Dex", "1dex", "my-dex", "\"\""}) {
    ExpectError(std::string("name: ") + bad + "\n" + rest, 1, "name", "is not a schema name");
  }
  ExpectError("name: " + std::string(64, 'a') + "\n" + rest, 1, "name", "at most 63 bytes");
  ExpectError("name: public\n" + rest, 1, "name", "is reserved");
  ExpectError("name: pg_dex\n" + rest, 1, "name", "is reserved");
  ExpectError("name: [dex]\n" + rest, 1, "name", "expected a name, not a list");
  for (const char* bad : {"1inch", "uni-v3", "\"\"", "___"}) {
    ExpectError(std::string("name: dex\ncontracts:\n  - name: ") + bad +
                    "\n    abi: abis/weth.json\n    address: \"" + kWeth + "\"\n",
                3, "contracts[0].name", "is not a usable contract name");
  }
}

TEST_F(ConfigTest, DuplicateContractNames) {
  const std::string weth = "    abi: abis/weth.json\n    address: \"" + std::string(kWeth) + "\"\n";
  ExpectError("name: dex\ncontracts:\n  - name: weth\n" + weth + "  - name: weth\n" + weth, 6,
              "contracts[1].name", "\"weth\" is also the name of contracts[0]");
  ExpectError("name: dex\ncontracts:\n  - name: weth\n" + weth + "  - name: WETH\n" + weth, 6,
              "contracts[1].name", "\"WETH\" names the same tables as contracts[0] (\"weth\")");
}

TEST_F(ConfigTest, TwoContractsWritingOneTable) {
  files_["conf/abis/a.json"] = R"([{"type":"event","name":"CreatedFoo","inputs":[]}])";
  files_["conf/abis/b.json"] = R"([{"type":"event","name":"Foo","inputs":[]}])";
  ExpectError(
      "name: dex\ncontracts:\n"
      "  - name: pool\n    abi: abis/a.json\n    address: \"" +
          std::string(kWeth) +
          "\"\n"
          "  - name: pool_created\n    abi: abis/b.json\n    address: \"" +
          kWeth + "\"\n",
      6, "contracts[1].name",
      "table dex.pool_created_foo is written by contracts[0] (event CreatedFoo()) and by "
      "this contract (event Foo())");
  // Within one contract: two event names that snake alike.
  files_["conf/abis/c.json"] = R"([{"type":"event","name":"PoolCreated","inputs":[]},
    {"type":"event","name":"Pool_Created","inputs":[]}])";
  ExpectError(One("    abi: abis/c.json\n    address: \"" + std::string(kWeth) + "\"\n"), 4,
              "contracts[0].abi",
              "events PoolCreated() and Pool_Created() both write table dex.c_pool_created");
}

TEST_F(ConfigTest, TableNamesOver63Bytes) {
  const std::string name(52, 'w');  // + "_withdrawal" = 63: fits
  const std::string head = "name: dex\ncontracts:\n  - name: " + name +
                           "\n    abi: abis/weth.json\n    address: \"" + kWeth + "\"\n";
  ASSERT_TRUE(Parse(head + "    events: [Withdrawal]\n").ok());
  ExpectError("name: dex\ncontracts:\n  - name: " + name + "w" +
                  "\n    abi: abis/weth.json\n    address: \"" + kWeth + "\"\n",
              3, "contracts[0].name", "(event Withdrawal(address,uint256)) is 64 bytes");
}

TEST_F(ConfigTest, BlockBounds) {
  const std::string head = "    abi: abis/weth.json\n    address: \"" + std::string(kWeth) + "\"\n";
  auto config = Parse(One(head + "    start_block: 10\n    end_block: 10\n"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->contracts[0].start_block, 10u);
  EXPECT_EQ(config->contracts[0].end_block, 10u);
  ExpectError(One(head + "    start_block: 11\n    end_block: 10\n"), 7, "contracts[0].end_block",
              "10 is below start_block 11");
  for (const char* bad : {"-1", "1.5", "1e6", "ten", "0x10", "\"\""}) {
    ExpectError(One(head + "    start_block: " + bad + "\n"), 6, "contracts[0].start_block",
                "is not a block number (a non-negative integer)");
  }
  ExpectError(One(head + "    end_block: 9223372036854775808\n"), 6, "contracts[0].end_block",
              "past the largest block number");
  ASSERT_TRUE(Parse(One(head + "    end_block: 9223372036854775807\n")).ok());
  ExpectError(One(head + "    end_block: [1]\n"), 6, "contracts[0].end_block",
              "expected a block number, not a list");
}

TEST_F(ConfigTest, FactoryParameterMustBeAnAddressInput) {
  const std::string head = "    abi: abis/pool.json\n    factory: {address: \"" +
                           std::string(kFactory) +
                           "\", abi: abis/factory.json, event: PoolCreated, ";
  ExpectError(One(head + "parameter: tickSpacing}\n"), 5, "contracts[0].factory.parameter",
              "\"tickSpacing\" is a int24, not an address (its address inputs: token0, token1 or "
              "pool)");
  ExpectError(One(head + "parameter: child}\n"), 5, "contracts[0].factory.parameter",
              "\"child\" is not an input of PoolCreated(address,address,uint24,int24,address)");
  ExpectError(One(head + "parameter: 5}\n"), 5, "contracts[0].factory.parameter",
              "\"5\" is not an input");
  ExpectError(One("    abi: abis/overloaded.json\n    factory: {address: \"" +
                  std::string(kFactory) + "\", event: Secret, parameter: who}\n"),
              5, "contracts[0].factory.event", "is anonymous");
  ExpectError(One("    abi: abis/pool.json\n    factory: []\n"), 5, "contracts[0].factory",
              "an empty list");
}

TEST(LoadContractsConfig, ReadsTheFileAndItsAbisBesideIt) {
  char dir_template[] = "/tmp/gapless_config_testXXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::filesystem::path dir = dir_template;
  std::filesystem::create_directories(dir / "abis");
  std::ofstream(dir / "abis" / "weth.json") << kWethAbi;
  std::ofstream(dir / "dex.yaml")
      << "name: dex\ncontracts:\n  - name: weth\n    abi: abis/weth.json\n"
         "    address: \""
      << kWeth << "\"\n";
  std::ofstream(dir / "bad.yaml") << "name: dex\ncontracts:\n  - name: weth\n    abi: nope.json\n"
                                     "    address: \""
                                  << kWeth << "\"\n";

  auto config = LoadContractsConfig((dir / "dex.yaml").string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->contracts.at(0).events.size(), 4u);

  auto bad = LoadContractsConfig((dir / "bad.yaml").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(bad.status().message(),
            (dir / "bad.yaml").string() + ":4: contracts[0].abi: cannot read \"" +
                (dir / "nope.json").string() + "\": No such file or directory");

  auto missing = LoadContractsConfig((dir / "missing.yaml").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "contracts config " + (dir / "missing.yaml").string() + ": No such file or directory");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gapless::abi
