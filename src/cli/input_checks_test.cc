#include "cli/input_checks.h"

#include <gtest/gtest.h>

namespace gapless {
namespace {

void ExpectRefused(std::string_view option, std::string_view value, std::string_view says) {
  Status st = CheckServerUrl(option, value);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << value;
  EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("S3CRET9"), std::string::npos) << st.message();
}

TEST(CheckServerUrl, RefusesWhatNoClientCouldUseWithoutShowingTheSecret) {
  ExpectRefused("rpc", "ws://h:1/v2/S3CRET9KEY", "WebSocket");
  ExpectRefused("rpc", "h:8545/v2/S3CRET9KEY", "no scheme");
  ExpectRefused("rpc", "http://h:70000/S3CRET9KEY", "65535");
  ExpectRefused("rpc", "http://h:port", "not a number");
  ExpectRefused("db", "mysql://root:S3CRET9@h/x", "mysql://");
  ExpectRefused("db", "postgresql://u:S3CRET9@x@h/db", "percent-encode");
  ExpectRefused("db", "postgresql://u:S3CRET9/x@h/db", "percent-encode");
  ExpectRefused("redis", "http://h:6379", "rediss://");
  ExpectRefused("lock-nodes", "redis://h:1,:S3CRET9@h:2:3", "':'");
  ExpectRefused("events", "redis:/:S3CRET9@h:1", "no scheme");
  // A raw '?' or '#' in a password an http or AMQP client would read as a query or fragment.
  ExpectRefused("rpc", "https://u:S3CRET9#x@h/", "%23");
  ExpectRefused("events", "amqps://u:S3CRET9?x@h:5671/v", "%3F");
  ExpectRefused("db", "postgresql://u:S3CRET9#x@y@h/db", "percent-encode");
}

TEST(CheckServerUrl, AcceptsEveryFormGaplessTakes) {
  for (auto [option, value] : std::vector<std::pair<std::string_view, std::string_view>>{
           {"rpc", "https://eth.example/v2/KEY, http://127.0.0.1:8545 weight=2"},
           {"db", "postgresql://u:p%40ss@[::1]:5432/db?sslmode=disable"},
           {"db", "postgresql:///db?host=/var/run/postgresql"},
           {"db", "postgresql://h1:5432,h2:5433/db"},
           {"db", "host=h port=5432 password='a b' dbname=x"},
           {"redis", "redis://h1:6379,h2:6379/2"},
           {"redis", "rediss://:pw@h:6380?cacertfile=/etc/ca.pem"},
           {"lock-nodes", "redis://a:1,redis://b:2,redis://c:3"},
           {"events", "kafka://k1:9092,k2:9092?sasl.password=x,amqps://u:p@mq:5671/v,redis://r:1"},
           // libpq and the Redis client read a raw '?' or '#' as part of the password.
           {"db", "postgresql://u:pa#ss@h:5432/db"},
           {"db", "postgres://u:pa?ss@h/db?sslmode=require"},
           {"redis", "redis://:pa#ss@h:6379/0"},
           {"events", "rediss://:pa?ss@h:6380"},
           // An '@' in the query of a URL without user info is no user info.
           {"db", "postgresql://h/db?application_name=me@laptop"},
           {"config", "anything"}}) {
    EXPECT_TRUE(CheckServerUrl(option, value).ok())
        << option << " " << value << ": " << CheckServerUrl(option, value).message();
  }
}

TEST(CheckNumbers, NamesTheValueAndWhereItCameFrom) {
  CLI::App app;
  uint64_t budget = 0;
  int timeout = 0;
  double rate = 0;
  app.add_option("--memory-budget", budget);
  app.add_option("--rpc-timeout", timeout);
  app.add_option("--rate-limit", rate);
  ValueOrigins origins = {{"memory-budget", "GAPLESS_MEMORY_BUDGET"}};
  Status negative = CheckNumbers(app, {"--memory-budget=-1"}, origins);
  EXPECT_EQ(negative.message(),
            "--memory-budget -1: must not be negative (from GAPLESS_MEMORY_BUDGET)");
  EXPECT_EQ(CheckNumbers(app, {"--rpc-timeout", "soon"}, {}).message(),
            "--rpc-timeout soon: not a number");
  EXPECT_TRUE(
      CheckNumbers(app, {"--rpc-timeout", "-5", "--rate-limit=2.5", "--memory-budget", "0"}, {})
          .ok())
      << "a negative int is CLI11's range check to refuse";
}

}  // namespace
}  // namespace gapless
