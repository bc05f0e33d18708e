// StablePort's ports are out of the kernel's ephemeral range, so no outgoing connection takes one
// between a server's death and its restart on the same port; FreePort's are in it.
#include "testing/free_port.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

namespace gapless {
namespace {

TEST(FreePortTest, StablePortIsBelowTheEphemeralRangeAndFree) {
  int low = 0, high = 0;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  ASSERT_GT(low, 11'000) << "this machine's ephemeral range leaves no room below it";
  // Outgoing connections draw their local port from [low, high]: FreePort's ports too.
  const int ephemeral = FreePort();
  EXPECT_GE(ephemeral, low);
  EXPECT_LE(ephemeral, high);
  for (int i = 0; i < 20; ++i) {
    const int port = StablePort();
    EXPECT_GE(port, 10'000);
    EXPECT_LT(port, low) << "an outgoing connection could take it";
    // Free: it binds.
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << port;
    close(fd);
  }
}

}  // namespace
}  // namespace gapless
