// TlsCertificates: a throwaway certificate authority and a server certificate it signed, for
// tests that start TLS-only servers (PostgreSQL, Redis, RabbitMQ). Made with the openssl command
// (Debian's openssl package): an EC P-256 CA, a server certificate for localhost and 127.0.0.1
// (subjectAltName) and a client certificate (for servers that check clients'), valid for a day. A
// second, unrelated CA (`other_ca`) is the certificate a client that must refuse the server would
// be given.
//
// Thread-safety: not thread-safe; one owner.
#pragma once

#include <string>

#include "core/status.h"

namespace gapless {

struct TlsCertificates {
  std::string dir;
  std::string ca;           // PEM: the CA that signed the server certificate
  std::string other_ca;     // PEM: a CA that signed nothing the servers present
  std::string server_cert;  // PEM, CN=localhost, SAN DNS:localhost, IP:127.0.0.1 (and also_ip)
  std::string server_key;   // PEM, mode 0600
  std::string client_cert;  // PEM, CN=gapless-client, extendedKeyUsage clientAuth, signed by ca
  std::string client_key;   // PEM, mode 0600
};

// Creates the files under dir (created if missing). Every path in the result is absolute (dir
// relative to the working directory), since servers may change directory before they read them.
// `owner`: a user to give them to (a server
// that runs as postgres or rabbitmq must read its key; empty: keep them). `also_ip`: one more
// IP address the server certificate names (an address of this machine off the loopback).
// Unavailable with the openssl output when a step fails.
Result<TlsCertificates> MakeTlsCertificates(const std::string& dir, const std::string& owner = "",
                                            const std::string& also_ip = "");

}  // namespace gapless
