// TLS to the servers gapless talks to, each a real server started by the test with TLS only and
// a throwaway CA (testing/tls_certs.h). PostgreSQL: a plain connection is refused by the server,
// sslmode=verify-full with another CA is refused by gapless (libpq), and with the right CA a
// whole `gapless index` of the devnet runs over TLS.
#include <gtest/gtest.h>

#include <filesystem>

#include "devnet_util.h"
#include "fake_node.h"
#include "store/pg.h"
#include "testing/pg_server.h"
#include "testing/tls_certs.h"

namespace gapless::e2e {
namespace {

TEST(TlsTest, PostgresqlOverTlsOnlyWithVerifyFull) {
  const std::string dir = std::string(GAPLESS_BINARY_DIR) + "/tls_itest-certs";
  std::filesystem::remove_all(dir);
  auto certs = MakeTlsCertificates(dir);
  ASSERT_TRUE(certs.ok()) << certs.status().ToString();
  auto server = PgServer::StartTls(*certs);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string base = (*server)->url("postgres");
  const std::string verified = base + "?sslmode=verify-full&sslrootcert=" + certs->ca;

  // The server takes TLS only.
  auto plain = PgConn::Connect(base + "?sslmode=disable");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("no encryption"), std::string::npos)
      << plain.status().ToString();
  // A certificate that does not verify is refused.
  auto other = PgConn::Connect(base + "?sslmode=verify-full&sslrootcert=" + certs->other_ca);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("certificate verify failed"), std::string::npos)
      << other.status().ToString();
  // The right CA: connected, and the connection is encrypted.
  auto conn = PgConn::Connect(verified);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto ssl = (*conn)->Query("SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()");
  ASSERT_TRUE(ssl.ok()) << ssl.status().ToString();
  EXPECT_EQ(ssl->Get(0, 0), "true");

  // A whole index run over it.
  const std::string to = "20";
  auto [code, out] = RunAll({"index", "--rpc", GAPLESS_TEST_ANVIL_URL, "--db", verified, "--from",
                             "0", "--to", to, "--progress", "off"});
  ASSERT_EQ(code, 0) << out;
  auto blocks = (*conn)->Query("SELECT count(*) FROM blocks");
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(blocks->Get(0, 0), "21");
  // gapless refuses a server whose certificate does not verify.
  auto [refused, why] =
      RunAll({"verify", "--db", base + "?sslmode=verify-full&sslrootcert=" + certs->other_ca});
  EXPECT_NE(refused, 0) << why;
  EXPECT_NE(why.find("certificate verify failed"), std::string::npos) << why;
}

}  // namespace
}  // namespace gapless::e2e
