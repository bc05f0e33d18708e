#include "testing/tls_certs.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace gapless {
namespace {

Status Sh(const std::string& command, const std::string& log) {
  const std::string full = "(" + command + ") >>" + log + " 2>&1";
  if (std::system(full.c_str()) != 0) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    return Unavailable("tls certificates: `" + command +
                       "` failed: " + text.substr(text.size() > 800 ? text.size() - 800 : 0));
  }
  return Status::Ok();
}

}  // namespace

Result<TlsCertificates> MakeTlsCertificates(const std::string& given_dir, const std::string& owner,
                                            const std::string& also_ip) {
  // Absolute paths: a server may change directory before it loads them (redis-server changes
  // into its --dir first).
  std::error_code ec;
  const std::string dir = std::filesystem::absolute(given_dir, ec).lexically_normal().string();
  if (ec) return Internal("tls certificates: no absolute path for " + given_dir);
  std::filesystem::create_directories(dir, ec);
  TlsCertificates t;
  t.dir = dir;
  t.ca = dir + "/ca.pem";
  t.other_ca = dir + "/other-ca.pem";
  t.server_cert = dir + "/server.pem";
  t.server_key = dir + "/server-key.pem";
  const std::string log = dir + "/openssl.log";
  const std::string ec_key = "openssl ecparam -name prime256v1 -genkey -noout -out ";
  GAPLESS_RETURN_IF_ERROR(Sh(ec_key + dir + "/ca-key.pem", log));
  GAPLESS_RETURN_IF_ERROR(Sh("openssl req -x509 -new -key " + dir + "/ca-key.pem -days 2 -subj " +
                                 "/CN=gapless-test-ca -out " + t.ca,
                             log));
  GAPLESS_RETURN_IF_ERROR(Sh(ec_key + dir + "/other-ca-key.pem", log));
  GAPLESS_RETURN_IF_ERROR(Sh("openssl req -x509 -new -key " + dir +
                                 "/other-ca-key.pem -days 2 -subj /CN=gapless-other-ca -out " +
                                 t.other_ca,
                             log));
  GAPLESS_RETURN_IF_ERROR(Sh(ec_key + t.server_key, log));
  {
    std::ofstream ext(dir + "/server.ext");
    ext << "subjectAltName=DNS:localhost,IP:127.0.0.1" << (also_ip.empty() ? "" : ",IP:" + also_ip)
        << "\n"
           "extendedKeyUsage=serverAuth\n"
           "keyUsage=digitalSignature,keyAgreement\n";
  }
  GAPLESS_RETURN_IF_ERROR(Sh(
      "openssl req -new -key " + t.server_key + " -subj /CN=localhost -out " + dir + "/server.csr",
      log));
  GAPLESS_RETURN_IF_ERROR(Sh("openssl x509 -req -in " + dir + "/server.csr -CA " + t.ca +
                                 " -CAkey " + dir +
                                 "/ca-key.pem -CAcreateserial -days 1 -extfile " + dir +
                                 "/server.ext -out " + t.server_cert,
                             log));
  t.client_cert = dir + "/client.pem";
  t.client_key = dir + "/client-key.pem";
  GAPLESS_RETURN_IF_ERROR(Sh(ec_key + t.client_key, log));
  {
    std::ofstream ext(dir + "/client.ext");
    ext << "extendedKeyUsage=clientAuth\n"
           "keyUsage=digitalSignature,keyAgreement\n";
  }
  GAPLESS_RETURN_IF_ERROR(Sh("openssl req -new -key " + t.client_key +
                                 " -subj /CN=gapless-client -out " + dir + "/client.csr",
                             log));
  GAPLESS_RETURN_IF_ERROR(Sh("openssl x509 -req -in " + dir + "/client.csr -CA " + t.ca +
                                 " -CAkey " + dir +
                                 "/ca-key.pem -CAcreateserial -days 1 -extfile " + dir +
                                 "/client.ext -out " + t.client_cert,
                             log));
  std::filesystem::permissions(
      t.client_key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  std::filesystem::permissions(
      t.server_key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  if (!owner.empty()) {
    GAPLESS_RETURN_IF_ERROR(Sh("chown -R " + owner + " " + dir, log));
  }
  return t;
}

}  // namespace gapless
