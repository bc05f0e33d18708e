#include "cli/layered_args.h"

#include <gtest/gtest.h>

#include <map>

namespace gapless {
namespace {

TEST(LayeredArgs, FlagsBeatEnvironmentWhichBeatsConfigFile) {
  auto config = ParseConfigText("# comment\nrpc = http://file\ndb = \"postgresql://file\"\n", "f");
  ASSERT_TRUE(config.ok());
  std::map<std::string, std::string> env{{"GAPLESS_RPC", "http://env"}};
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto args =
      LayerArguments({"--rpc", "http://flag"}, {"rpc", "db"}, {"rpc", "db"}, *config, "f", getenv);
  ASSERT_TRUE(args.ok());
  // With take-last semantics the last --rpc wins: the flag.
  EXPECT_EQ(*args, (std::vector<std::string>{"--rpc=http://file", "--db=postgresql://file",
                                             "--rpc=http://env", "--rpc", "http://flag"}));
}

// A comment may end a line: whitespace, then '#'. A '#' with no whitespace before it is part of
// the value (a PostgreSQL or Redis password may hold one raw), and so is one inside quotes.
TEST(LayeredArgs, ACommentAfterWhitespaceEndsTheValueARawHashInAPasswordStays) {
  auto config = ParseConfigText(
      "db = postgresql://u:pw#1@h/db   # the primary\n"
      "redis = redis://:a#b@h:6379\t# coordination\n"
      "rpc = \"http://h/ #x\"  # quoted\n"
      "batch = 10 #\n"
      "events =#not a comment\n",
      "f");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->size(), 5u);
  EXPECT_EQ((*config)[0].value, "postgresql://u:pw#1@h/db");
  EXPECT_EQ((*config)[1].value, "redis://:a#b@h:6379");
  EXPECT_EQ((*config)[2].value, "http://h/ #x");
  EXPECT_EQ((*config)[3].value, "10");
  EXPECT_EQ((*config)[4].value, "#not a comment");
}

TEST(LayeredArgs, UnknownConfigKeyIsAnErrorNamingTheKeyAndLine) {
  auto config = ParseConfigText("rpc = x\nrcp = y\n", "/etc/gapless.conf");
  ASSERT_TRUE(config.ok());
  auto args = LayerArguments({}, {"rpc"}, {"rpc", "table"}, *config, "/etc/gapless.conf",
                             [](const char*) -> const char* { return nullptr; });
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(args.status().message().find("rcp"), std::string::npos);
  EXPECT_NE(args.status().message().find("line 2"), std::string::npos);
}

TEST(LayeredArgs, KeyOfAnotherSubcommandIsSkipped) {
  auto config = ParseConfigText("table = logs\nrpc = x\n", "f");
  auto args = LayerArguments({}, {"rpc"}, {"rpc", "table"}, *config, "f",
                             [](const char*) -> const char* { return nullptr; });
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, std::vector<std::string>{"--rpc=x"});
}

TEST(LayeredArgs, MalformedLineNamesFileAndLine) {
  auto config = ParseConfigText("rpc = x\njust-a-word\n", "my.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("my.conf line 2"), std::string::npos);
}

TEST(LayeredArgs, EnvNames) {
  EXPECT_EQ(EnvNameForKey("rpc-timeout"), "GAPLESS_RPC_TIMEOUT");
  EXPECT_EQ(EnvNameForKey("db"), "GAPLESS_DB");
}

TEST(SecretFiles, EveryFormReadsTheFileAndKeepsOtherArguments) {
  std::map<std::string, std::string> files = {{"/run/db", "postgresql://u:pw@h/x\n"},
                                              {"/run/rpc", "https://h/v2/KEY123456"}};
  auto read = [&](const std::string& path) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
  auto args = ReadSecretFiles({"--db-file", "/run/db", "--rpc=@/run/rpc", "--from", "5", "--redis",
                               "redis://h:1", "--events-timeout=3"},
                              SecretKeys(), read);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_EQ(*args, (std::vector<std::string>{"--db=postgresql://u:pw@h/x",
                                             "--rpc=https://h/v2/KEY123456", "--from", "5",
                                             "--redis", "redis://h:1", "--events-timeout=3"}));
  // The environment's and the config file's forms arrive as --key-file=PATH.
  args = ReadSecretFiles({"--lock-nodes-file=/run/rpc", "--db", "@/run/db"}, SecretKeys(), read);
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_EQ(*args, (std::vector<std::string>{"--lock-nodes=https://h/v2/KEY123456",
                                             "--db=postgresql://u:pw@h/x"}));
}

TEST(SecretFiles, AFileThatCannotBeReadNamesTheOptionAndPath) {
  auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto args = ReadSecretFiles({"--db-file", "/nope"}, SecretKeys(), none);
  ASSERT_FALSE(args.ok());
  EXPECT_EQ(args.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(args.status().message().find("--db-file"), std::string::npos);
  EXPECT_NE(args.status().message().find("/nope"), std::string::npos);
  auto empty = [](const std::string&) -> std::optional<std::string> { return "\n"; };
  args = ReadSecretFiles({"--rpc", "@/e"}, SecretKeys(), empty);
  ASSERT_FALSE(args.ok());
  EXPECT_NE(args.status().message().find("empty"), std::string::npos);
  // Not a secret key: an @ value is passed on as is.
  args = ReadSecretFiles({"--topic", "@blocks"}, SecretKeys(), none);
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, (std::vector<std::string>{"--topic", "@blocks"}));
}

}  // namespace
}  // namespace gapless
