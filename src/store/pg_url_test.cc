#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "store/pg.h"

namespace gapless {
namespace {

TEST(PgUrlWithDatabase, ReplacesOnlyTheDatabase) {
  EXPECT_EQ(*PgUrlWithDatabase("postgresql://u:p@h:1/postgres?sslmode=disable", "t1"),
            "postgresql://u:p@h:1/t1?sslmode=disable");
  EXPECT_EQ(*PgUrlWithDatabase("postgresql://u@h:1", "t1"), "postgresql://u@h:1/t1");
  EXPECT_EQ(*PgUrlWithDatabase("host=h port=1", "t1"), "host=h port=1 dbname='t1'");
}

TEST(PgConnect, BadUrlIsFailedPreconditionWithoutThePassword) {
  auto conn = PgConn::Connect("postgresql://u:hunter2@h:notaport/db");
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), Code::kFailedPrecondition) << conn.status().ToString();
  EXPECT_EQ(conn.status().message().find("hunter2"), std::string::npos) << conn.status().ToString();
  EXPECT_NE(conn.status().message().find("postgresql://***@h:notaport/db"), std::string::npos)
      << conn.status().ToString();
}

// What PgTlsDefaults adds, as "key=value ..." (the environment's PG* variables unset).
std::string TlsDefaults(const std::string& url, const std::string& cas) {
  for (const char* name : {"PGSSLMODE", "PGSSLROOTCERT", "PGHOST"}) unsetenv(name);
  auto got = PgTlsDefaults(url, cas);
  if (!got.ok()) return got.status().ToString();
  std::string out;
  for (const auto& [k, v] : *got) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out;
}

TEST(PgTlsDefaults, AServerOffThisMachineIsVerifiedAgainstTheSystemCas) {
  const std::string cas = ::testing::TempDir() + "/pg_url_test-cas.pem";
  { std::ofstream(cas) << "not read here\n"; }
  const char* home = std::getenv("HOME");
  const std::string saved_home = home != nullptr ? home : "";
  setenv("HOME", ::testing::TempDir().c_str(), 1);  // no ~/.postgresql/root.crt there
  EXPECT_EQ(TlsDefaults("postgresql://u@db.example.com/x", cas),
            "sslmode=verify-full sslrootcert=" + cas);
  EXPECT_EQ(TlsDefaults("host=10.0.0.5 dbname=x", cas), "sslmode=verify-full sslrootcert=" + cas);
  // One remote host of several is enough.
  EXPECT_EQ(TlsDefaults("postgresql://u@localhost:1,db.example.com:2/x", cas),
            "sslmode=verify-full sslrootcert=" + cas);
  // The URL's own root certificate: only the mode is added (libpq takes the URL's file).
  EXPECT_EQ(TlsDefaults("postgresql://u@db.example.com/x?sslrootcert=/etc/ca.pem", cas),
            "sslmode=verify-full");
  // No system bundle: the mode alone (libpq then names ~/.postgresql/root.crt as missing).
  EXPECT_EQ(TlsDefaults("postgresql://u@db.example.com/x", cas + ".absent"), "sslmode=verify-full");
  setenv("HOME", saved_home.c_str(), 1);
}

TEST(PgTlsDefaults, TheUrlsModeLoopbackAndSocketsAreLeftToLibpq) {
  const std::string cas = ::testing::TempDir() + "/pg_url_test-cas.pem";
  { std::ofstream(cas) << "not read here\n"; }
  for (const char* url :
       {"postgresql://u@db.example.com/x?sslmode=disable",
        "postgresql://u@db.example.com/x?sslmode=require", "postgresql://u@127.0.0.1:5432/x",
        "postgresql://u@127.1.2.3/x", "postgresql://u@localhost/x", "postgresql://u@[::1]:5/x",
        "host=/var/run/postgresql dbname=x", "postgresql:///x", "dbname=x"}) {
    EXPECT_EQ(TlsDefaults(url, cas), "") << url;
  }
  setenv("PGSSLMODE", "disable", 1);
  auto got = PgTlsDefaults("postgresql://u@db.example.com/x", cas);
  unsetenv("PGSSLMODE");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty()) << "PGSSLMODE is the user's choice";
}

TEST(PgQuoteIdent, DoublesQuotes) { EXPECT_EQ(PgQuoteIdent("a\"b"), "\"a\"\"b\""); }

}  // namespace
}  // namespace gapless
