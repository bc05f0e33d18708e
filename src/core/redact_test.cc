#include "core/redact.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace gapless {
namespace {

TEST(RedactUrl, HidesUserInfoWhateverTheScheme) {
  EXPECT_EQ(RedactUrl("https://user:SECRETKEY@host/rpc"), "https://***@host/rpc");
  EXPECT_EQ(RedactUrl("https://SECRETKEY@host"), "https://***@host");
  EXPECT_EQ(RedactUrl("postgresql://alice:s3cret@db.example:5432/chain1"),
            "postgresql://***@db.example:5432/chain1");
  EXPECT_EQ(RedactUrl("redis://:pw@127.0.0.1:6379/2"), "redis://***@127.0.0.1:6379/2");
  EXPECT_EQ(RedactUrl("amqps://guest:guest@mq:5671/vhost"), "amqps://***@mq:5671/vhost");
}

TEST(RedactUrl, HidesApiKeysInHttpPaths) {
  // The example: a 9-character key after a version segment.
  EXPECT_EQ(RedactUrl("http://user:SECRETKEY@host/v2/APIKEY123"), "http://***@host/v2/***");
  EXPECT_EQ(RedactUrl("https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef"),
            "https://mainnet.infura.io/v3/***");
  EXPECT_EQ(RedactUrl("https://x.quiknode.pro/abcdefghijklmnopqrstuvwxyzABCDEF/"),
            "https://x.quiknode.pro/***/");
  // Words are not keys.
  EXPECT_EQ(RedactUrl("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
  EXPECT_EQ(RedactUrl("http://127.0.0.1:8545/"), "http://127.0.0.1:8545/");
  EXPECT_EQ(RedactUrl("https://eth-mainnet.example.com/rpc/ext/bor"),
            "https://eth-mainnet.example.com/rpc/ext/bor");
}

TEST(RedactUrl, HidesQueryValuesButKeepsConnectionSettings) {
  EXPECT_EQ(RedactUrl("https://node.example.com/rpc?apikey=s3cret"),
            "https://node.example.com/rpc?apikey=***");
  EXPECT_EQ(RedactUrl("postgres://alice:s3cret@db/x?sslmode=require&password=other"),
            "postgres://***@db/x?sslmode=require&password=***");
  EXPECT_EQ(RedactUrl("https://h/?tok3n"), "https://h/?***");
  EXPECT_EQ(RedactUrl("https://h/p#frag"), "https://h/p");
}

TEST(RedactUrl, OtherSchemesKeepTheirPath) {
  // A database name, a Redis db number and a vhost are not keys.
  EXPECT_EQ(RedactUrl("postgresql://gapless@127.0.0.1:55433/gapless_test_12345678"),
            "postgresql://***@127.0.0.1:55433/gapless_test_12345678");
  EXPECT_EQ(RedactUrl("redis://127.0.0.1:6379/15"), "redis://127.0.0.1:6379/15");
  EXPECT_EQ(RedactUrl("kafka://127.0.0.1:9092,127.0.0.1:9093"),
            "kafka://127.0.0.1:9092,127.0.0.1:9093");
}

TEST(RedactUrl, HidesPasswordsInLibpqKeyValueForm) {
  EXPECT_EQ(RedactUrl("host=db port=5432 password=s3cret dbname=x"),
            "host=db port=5432 password=*** dbname=x");
  EXPECT_EQ(RedactUrl("host=db password = 'it''s secret' user=a"), "host=db password=*** user=a");
  EXPECT_EQ(RedactUrl("password='a\\'b c' host=h"), "password=*** host=h");
  EXPECT_EQ(RedactUrl("host=h sslpassword=k3y"), "host=h sslpassword=***");
  // What does not parse is not shown.
  EXPECT_EQ(RedactUrl("host=h s3cret"), "host=h ***");
}

TEST(RedactUrlList, RedactsEachUrlAndKeepsMultiHostUrlsWhole) {
  EXPECT_EQ(RedactUrlList("redis://:a@h1:1,redis://:b@h2:2"), "redis://***@h1:1,redis://***@h2:2");
  EXPECT_EQ(RedactUrlList("redis://:a@h1:1,h2:2/0"), "redis://***@h1:1,h2:2/0");
  EXPECT_EQ(RedactUrlList("redis://h1:1,amqp://u:p@h2/v,kafka://k:9092"),
            "redis://h1:1,amqp://***@h2/v,kafka://k:9092");
  EXPECT_EQ(RedactUrlList(""), "");
}

TEST(SecretsOf, ListsWhatRedactUrlHides) {
  EXPECT_EQ(
      SecretsOf("http://RPCUSER1:PASSW0RD@h:1/v2/APIKEY123?key=QKEY0SECRET&sslmode=require#FRAG"),
      (std::vector<std::string>{"RPCUSER1", "PASSW0RD", "FRAG", "APIKEY123", "QKEY0SECRET"}));
  EXPECT_EQ(SecretsOf("postgresql://u:pw@h/chain1"), std::vector<std::string>{})
      << "secrets under 4 characters are not listed; the path of a database URL is no secret";
  EXPECT_EQ(SecretsOf("host=h password='s3cret' dbname=x"), std::vector<std::string>{"s3cret"});
  EXPECT_EQ(ScrubSecrets("invalid key APIKEY123 (APIKEY123)", {"APIKEY123"}),
            "invalid key *** (***)");
}

// Issue 35 item 10: input that does not parse is redacted as far as it can be read.
TEST(RedactUrl, MalformedUrlsShowNoSecret) {
  // A raw '@' or '/' in the password: hidden whole, whichever '@' a client takes.
  EXPECT_EQ(RedactUrl("postgresql://u:PAS@SW0RD@127.0.0.1:9/x"), "postgresql://***@127.0.0.1:9/x");
  EXPECT_EQ(RedactUrl("postgresql://u:PA/SSW0RD@127.0.0.1:9/x"), "postgresql://***@127.0.0.1:9/x");
  // No scheme: the user info and key-like path segments are hidden as for http.
  EXPECT_EQ(RedactUrl("redis:/:PASSW0RD@127.0.0.1:9"), "***@127.0.0.1:9");
  EXPECT_EQ(RedactUrl("127.0.0.1:8545/v2/APIKEY123"), "127.0.0.1:8545/v2/***");
  EXPECT_EQ(RedactUrl("user:PASSW0RD@host:1"), "***@host:1");
  // Not libpq's key=value form, though it holds a '='.
  EXPECT_EQ(RedactUrl("redis:/:PASSW0RD@h?x=1"), "***@h?x=***");
  EXPECT_EQ(RedactUrl("mysql://root:PASSW0RD@h/db"), "mysql://***@h/db");
}

// libpq and the Redis client read a raw '?' or '#' as part of the password: hidden whole, not cut
// into a shown "u:PASS" and a hidden query or fragment.
TEST(RedactUrl, PasswordWithARawQuestionMarkOrHashIsHiddenWhole) {
  EXPECT_EQ(RedactUrl("postgresql://u:PASS#W0RD@127.0.0.1:9/x"), "postgresql://***@127.0.0.1:9/x");
  EXPECT_EQ(RedactUrl("postgresql://u:PASS?W0RD@127.0.0.1:9/x?sslmode=disable"),
            "postgresql://***@127.0.0.1:9/x?sslmode=disable");
  EXPECT_EQ(RedactUrl("redis://:PA#SS?W0RD@h:1/0"), "redis://***@h:1/0");
  auto secrets = SecretsOf("postgresql://u:PASS#W0RD@h/x");
  EXPECT_NE(std::find(secrets.begin(), secrets.end(), "PASS#W0RD"), secrets.end());
  // Without an '@' there is no user info to hide: the query is redacted as before.
  EXPECT_EQ(RedactUrl("postgresql://h:9/x?sslmode=disable#frag"),
            "postgresql://h:9/x?sslmode=disable");
}

TEST(SecretsOf, ListsEveryPieceOfAMalformedUserInfo) {
  // libpq reads "u:PAS@SW0RD@h" as password "PAS" and host "SW0RD@h": both pieces are secrets.
  auto secrets = SecretsOf("postgresql://user:PASS@SW0RD@h/x");
  EXPECT_NE(std::find(secrets.begin(), secrets.end(), "SW0RD"), secrets.end());
  EXPECT_NE(std::find(secrets.begin(), secrets.end(), "PASS@SW0RD"), secrets.end());
  auto no_scheme = SecretsOf("h:1/v2/APIKEY123");
  EXPECT_EQ(no_scheme, std::vector<std::string>{"APIKEY123"});
}

TEST(RedactText, HidesEveryUrlAndPasswordInFreeText) {
  EXPECT_EQ(RedactText("expected `key = value`, got `db: postgresql://u:PASSW0RD@h:5432/x`"),
            "expected `key = value`, got `db: postgresql://***@h:5432/x`");
  EXPECT_EQ(RedactText("The following argument was not expected: --dbb=postgresql://u:PW0RD@h/x"),
            "The following argument was not expected: --dbb=postgresql://***@h/x");
  EXPECT_EQ(RedactText("'https://b/v2/APIKEY123' is not a setting"),
            "'https://b/v2/***' is not a setting");
  EXPECT_EQ(RedactText("could not translate host name \"SW0RD@127.0.0.1\" to address"),
            "could not translate host name \"***@127.0.0.1\" to address");
  EXPECT_EQ(RedactText("missing \"=\" after \"host=h password='a b' x\""),
            "missing \"=\" after \"host=h password=*** x\"");
  EXPECT_EQ(RedactText("host=h password = s3cret dbname=x"), "host=h password=*** dbname=x");
  EXPECT_EQ(RedactText("password authentication failed for user \"gapless\""),
            "password authentication failed for user \"gapless\"");
  EXPECT_EQ(RedactText("redis://:a@h1:1,redis://:b@h2:2 down"),
            "redis://***@h1:1,redis://***@h2:2 down");
}

// A URL cut inside its password by a space or a quote (CLI11 quotes an argument it did not expect
// as is; a config line is split at spaces): no piece of the password shows.
TEST(RedactText, UrlCutInsideItsPasswordShowsNoPiece) {
  EXPECT_EQ(RedactText("The following argument was not expected: postgresql://u:PASS W0RD@h/db"),
            "The following argument was not expected: postgresql://***@h/db");
  EXPECT_EQ(RedactText("got `db: postgresql://u:PASS W0RD@h:5432/x`"),
            "got `db: postgresql://***@h:5432/x`");
  EXPECT_EQ(RedactText("got postgresql://u:PASS'W0RD@h/db, redis://h:1"),
            "got postgresql://***@h/db, redis://h:1");
  EXPECT_EQ(RedactText("redis://:PASS  W0RD X@h:1\nnext line"), "redis://***@h:1\nnext line");
  // No '@' on the line: everything after "://" is hidden.
  EXPECT_EQ(RedactText("--db=postgresql://u:PASSW0RD is wrong\nu@h"),
            "--db=postgresql://*** is wrong\n***@h");
  // Ports, IPv6 hosts and host lists are no password.
  EXPECT_EQ(RedactText("http://[::1]:8545 and redis://h1:6379,h2:6379/0 down, user@x"),
            "http://[::1]:8545 and redis://h1:6379,h2:6379/0 down, ***@x");
}

}  // namespace
}  // namespace gapless
