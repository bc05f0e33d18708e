#include "abi/tables.h"

#include <gtest/gtest.h>

#include <set>

namespace gapless::abi {
namespace {

Type T(std::string_view text) {
  auto type = ParseType(text);
  EXPECT_TRUE(type.ok()) << text;
  return type.ok() ? *type : Type{};
}

Param P(std::string name, std::string_view type, bool indexed = false) {
  return Param{std::move(name), T(type), indexed};
}

Event Ev(std::string name, std::vector<Param> inputs, bool anonymous = false) {
  return Event{std::move(name), std::move(inputs), anonymous};
}

ContractsConfig Config(std::vector<ContractSpec> contracts) {
  ContractsConfig config;
  config.path = "dex.yaml";
  config.name = "dex";
  config.contracts = std::move(contracts);
  return config;
}

ContractSpec Contract(std::string name, std::vector<Event> events,
                      std::vector<std::string> overloaded = {}) {
  ContractSpec c;
  c.name = std::move(name);
  c.addresses = {"0xc02aaa39b223fe8d0a0e5c4f27ead9083c756cc2"};
  c.events = std::move(events);
  c.overloaded_names = std::move(overloaded);
  return c;
}

EventTable OneTable(const Event& event) {
  auto tables = PlanTables(Config({Contract("c", {event})}));
  EXPECT_EQ(tables.size(), 1u);
  return tables.at(0);
}

std::vector<std::string> ColumnNames(const EventTable& table) {
  std::vector<std::string> names;
  for (const Column& c : table.columns) names.push_back(c.name);
  return names;
}

TEST(SnakeCase, CamelPascalAndDigits) {
  const std::pair<const char*, const char*> cases[] = {
      {"PoolCreated", "pool_created"},
      {"tickSpacing", "tick_spacing"},
      {"ERC20Token", "erc20_token"},
      {"sqrtPriceX96", "sqrt_price_x96"},
      {"_value", "value"},
      {"USDCVault", "usdc_vault"},
      {"amount0In", "amount0_in"},
      {"amount1Out", "amount1_out"},
      {"token0", "token0"},
      {"uniswapV3Pool", "uniswap_v3_pool"},
      {"already_snake", "already_snake"},
      {"Foo_Bar", "foo_bar"},
      {"WETH", "weth"},
      {"getHTTPResponse", "get_http_response"},
      {"", ""},
      {"___", ""},
      {"value_", "value_"},
      {"X", "x"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(SnakeCase(in), want) << in;
}

TEST(SnakeCase, AnAcronymKeepsItsPluralS) {
  EXPECT_EQ(SnakeCase("tokenIDs"), "token_ids");
  EXPECT_EQ(SnakeCase("NFTsOwned"), "nfts_owned");
  EXPECT_EQ(SnakeCase("IDs"), "ids");
  // A longer lower-case run after the acronym is a new word.
  EXPECT_EQ(SnakeCase("NFTSale"), "nft_sale");
  EXPECT_EQ(SnakeCase("ASet"), "a_set");
}

TEST(SnakeCase, OtherBytesBecomeUnderscores) {
  EXPECT_EQ(SnakeCase("$value"), "value");
  EXPECT_EQ(SnakeCase("a$b"), "a_b");
  EXPECT_EQ(SnakeCase("uni-v3"), "uni_v3");
  EXPECT_EQ(SnakeCase("caf\xc3\xa9"), "caf__");
}

TEST(Tables, NamedSchemaContractEventInConfigOrder) {
  auto config = Config(
      {Contract("WETH", {Ev("Deposit", {P("dst", "address", true), P("wad", "uint256")}),
                         Ev("Withdrawal", {P("src", "address", true), P("wad", "uint256")})}),
       Contract("uniPools", {Ev("PoolCreated", {P("pool", "address")})})});
  auto tables = PlanTables(config);
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0].table, "weth_deposit");
  EXPECT_EQ(tables[1].table, "weth_withdrawal");
  EXPECT_EQ(tables[2].table, "uni_pools_pool_created");
  for (const auto& t : tables) EXPECT_EQ(t.schema, "dex");
  EXPECT_EQ(tables[0].contract, "WETH");
  EXPECT_EQ(tables[2].contract, "uniPools");
  EXPECT_EQ(tables[0].event.name, "Deposit");
  EXPECT_EQ(tables[0].topic0, tables[0].event.Topic0());
  EXPECT_EQ(tables[0].topic0.size(), 32u);
  EXPECT_EQ(ColumnNames(tables[0]), (std::vector<std::string>{"dst", "wad"}));
  EXPECT_EQ(tables[0].columns[1].input, 1);
}

TEST(Tables, OverloadedNamesGetTheirTopic0Prefix) {
  Event erc20 =
      Ev("Transfer", {P("from", "address", true), P("to", "address", true), P("value", "uint256")});
  Event other = Ev("Transfer", {P("to", "address", true), P("value", "uint256")});
  Event approval = Ev("Approval", {P("owner", "address", true), P("spender", "address", true),
                                   P("value", "uint256")});
  // Overloaded in the ABI, only one overload selected: the suffix stays.
  auto tables = PlanTables(Config({Contract("tok", {erc20, approval}, {"Transfer"})}));
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].table,
            "tok_transfer_ddf252ad");  // keccak("Transfer(address,address,uint256)")
  EXPECT_EQ(tables[1].table, "tok_approval");

  // Both selected, even without overloaded_names: each its own suffix.
  tables = PlanTables(Config({Contract("tok", {erc20, other})}));
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].table, "tok_transfer_ddf252ad");
  EXPECT_NE(tables[1].table, tables[0].table);
  EXPECT_EQ(tables[1].table.rfind("tok_transfer_", 0), 0u);
  EXPECT_EQ(tables[1].table.size(), std::string("tok_transfer_").size() + 8);

  Event swap =
      Ev("Swap", {P("sender", "address", true), P("recipient", "address", true),
                  P("amount0", "int256"), P("amount1", "int256"), P("sqrtPriceX96", "uint160"),
                  P("liquidity", "uint128"), P("tick", "int24")});
  tables = PlanTables(Config({Contract("pools", {swap}, {"Swap"})}));
  EXPECT_EQ(tables.at(0).table, "pools_swap_c42079f9");  // the example in tables.h
}

TEST(Tables, AnonymousEventHasNoTopic0) {
  auto table = OneTable(Ev("Log", {P("x", "uint256", true)}, /*anonymous=*/true));
  EXPECT_EQ(table.topic0, "");
  EXPECT_EQ(table.table, "c_log");
}

TEST(Tables, UnnamedCollidingAndUnusableInputsAreArgI) {
  std::string long_name(64, 'a');
  auto table = OneTable(Ev("E", {
                                    P("", "uint256"),                 // 0: unnamed
                                    P("address", "address"),          // 1: a fixed column
                                    P("blockNumber", "uint64"),       // 2: snakes to a fixed column
                                    P("amountIn", "uint256"),         // 3
                                    P("amount_in", "uint256"),        // 4: collides with 3
                                    P(long_name, "uint256"),          // 5: over 63 bytes
                                    P("_0x", "uint256"),              // 6: "0x" starts with a digit
                                    P("sqrtPriceX96", "uint160"),     // 7
                                    P(std::string(63, 'b'), "bool"),  // 8: 63 bytes is fine
                                }));
  EXPECT_EQ(ColumnNames(table),
            (std::vector<std::string>{"arg0", "arg1", "arg2", "amount_in", "arg4", "arg5", "arg6",
                                      "sqrt_price_x96", std::string(63, 'b')}));
  for (size_t i = 0; i < table.columns.size(); ++i) EXPECT_EQ(table.columns[i].input, int(i));
}

TEST(Tables, AnInputNamedLikeAFallbackDoesNotCollide) {
  auto table = OneTable(Ev("E", {P("arg1", "uint256"), P("", "uint256")}));
  auto names = ColumnNames(table);
  EXPECT_EQ(names, (std::vector<std::string>{"arg1", "arg1_"}));
}

TEST(Tables, EveryTypesColumnType) {
  const std::pair<const char*, ColumnType> cases[] = {
      {"uint8", ColumnType::kBigint},    {"uint56", ColumnType::kBigint},
      {"uint64", ColumnType::kNumeric},  {"uint256", ColumnType::kNumeric},
      {"int8", ColumnType::kBigint},     {"int64", ColumnType::kBigint},
      {"int72", ColumnType::kNumeric},   {"int256", ColumnType::kNumeric},
      {"address", ColumnType::kBytea},   {"bytes1", ColumnType::kBytea},
      {"bytes32", ColumnType::kBytea},   {"bytes", ColumnType::kBytea},
      {"bool", ColumnType::kBoolean},    {"string", ColumnType::kText},
      {"uint256[]", ColumnType::kJsonb}, {"address[2]", ColumnType::kJsonb},
      {"string[]", ColumnType::kJsonb},
  };
  for (const auto& [type, want] : cases) {
    EXPECT_EQ(ColumnTypeOf(P("x", type)), want) << type;
  }
  Type tuple = ParseType("tuple", {T("uint256"), T("address")}, {"amount", "to"}).value();
  EXPECT_EQ(ColumnTypeOf(Param{"t", tuple, false}), ColumnType::kJsonb);

  // Indexed: value types decode from the topic; strings, bytes, arrays and tuples are their hash.
  EXPECT_EQ(ColumnTypeOf(P("x", "uint8", true)), ColumnType::kBigint);
  EXPECT_EQ(ColumnTypeOf(P("x", "uint256", true)), ColumnType::kNumeric);
  EXPECT_EQ(ColumnTypeOf(P("x", "bool", true)), ColumnType::kBoolean);
  EXPECT_EQ(ColumnTypeOf(P("x", "address", true)), ColumnType::kBytea);
  EXPECT_EQ(ColumnTypeOf(P("x", "string", true)), ColumnType::kBytea);
  EXPECT_EQ(ColumnTypeOf(P("x", "bytes", true)), ColumnType::kBytea);
  EXPECT_EQ(ColumnTypeOf(P("x", "uint256[]", true)), ColumnType::kBytea);
  EXPECT_EQ(ColumnTypeOf(P("x", "uint256[2]", true)), ColumnType::kBytea);
  EXPECT_EQ(ColumnTypeOf(Param{"t", tuple, true}), ColumnType::kBytea);

  auto table = OneTable(Ev("E", {P("a", "uint256", true), P("b", "string")}));
  EXPECT_EQ(table.columns[0].type, ColumnType::kNumeric);
  EXPECT_EQ(table.columns[1].type, ColumnType::kText);
}

TEST(Tables, ColumnTypeSql) {
  EXPECT_STREQ(ColumnTypeSql(ColumnType::kBigint), "BIGINT");
  EXPECT_STREQ(ColumnTypeSql(ColumnType::kNumeric), "NUMERIC(78,0)");
  EXPECT_STREQ(ColumnTypeSql(ColumnType::kBytea), "BYTEA");
  EXPECT_STREQ(ColumnTypeSql(ColumnType::kBoolean), "BOOLEAN");
  EXPECT_STREQ(ColumnTypeSql(ColumnType::kText), "TEXT");
  EXPECT_STREQ(ColumnTypeSql(ColumnType::kJsonb), "JSONB");
}

TEST(Tables, DefinitionFollowsTheEventsShapeOnly) {
  auto tuple = [](std::string second_name) {
    return ParseType("tuple", {T("uint256"), T("address")}, {"amount", std::move(second_name)})
        .value();
  };
  auto make = [&](std::string name, std::string_view type, bool indexed, bool anonymous,
                  std::string member) {
    return Ev("Swap",
              {P("sender", "address", true), P(std::move(name), type, indexed),
               Param{"leg", tuple(std::move(member)), false}},
              anonymous);
  };
  const Event base = make("amount", "uint256", false, false, "to");
  const std::string definition = OneTable(base).Definition();
  EXPECT_NE(definition.find("Swap(address,uint256,(uint256,address))"), std::string::npos)
      << definition;

  // Not the contract, schema or table: the same event elsewhere has the same definition.
  auto config = Config({Contract("other_contract", {base}, {"Swap"})});
  config.name = "elsewhere";
  EXPECT_EQ(PlanTables(config).at(0).Definition(), definition);
  EXPECT_EQ(OneTable(make("amount", "uint256", false, false, "to")).Definition(), definition);

  const Event changed[] = {
      make("amount2", "uint256", false, false, "to"),  // an input's name
      make("amountIn", "uint256", false, false, "to"),
      make("amount", "uint128", false, false, "to"),  // its type
      make("amount", "int256", false, false, "to"),
      make("amount", "uint256", true, false, "to"),          // its indexed flag
      make("amount", "uint256", false, true, "to"),          // anonymity
      make("amount", "uint256", false, false, "recipient"),  // a tuple member's name (JSONB keys)
  };
  std::set<std::string> seen = {definition};
  for (const Event& e : changed) {
    const std::string d = OneTable(e).Definition();
    EXPECT_NE(d, definition) << d;
    EXPECT_TRUE(seen.insert(d).second) << d;
  }
  Event renamed = base;
  renamed.name = "Swapped";
  EXPECT_NE(OneTable(renamed).Definition(), definition);
}

TEST(Tables, DefinitionKeepsAStrangeNameOnItsLine) {
  auto table = OneTable(Ev("E", {P("a\nb\"c", "uint256")}));
  const std::string d = table.Definition();
  EXPECT_NE(d.find("\"a\\x0ab\\\"c\""), std::string::npos) << d;
}

}  // namespace
}  // namespace gapless::abi
