// FreePort: a TCP port on 127.0.0.1 that the kernel considers free right now (bind to port 0,
// read it back, close), for test servers that pick their own port. Another process may take it
// before it is used: callers retry their start on a bind failure.
//
// StablePort: the same, for a port that is bound again later (a server restarted on its port, the
// --metrics-addr of a process the chaos harness restarts). FreePort's ports are in the kernel's
// ephemeral range, which every outgoing connection draws from: a busy test takes such a port
// as a client's local port within seconds of its server's death, and the restart finds it in use
// (a chaos run saw a worker fail to restart 20 times so). StablePort picks at random below that
// range, where only a bind can take a port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

namespace gapless {

inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

inline int StablePort() {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  constexpr int kFirst = 10'000;
  if (low <= kFirst + 1'000) return FreePort();  // no room below the ephemeral range
  static thread_local std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = kFirst + static_cast<int>(rng() % static_cast<unsigned>(low - kFirst));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free) return port;
  }
  return FreePort();
}

}  // namespace gapless
