// config_file: LoadContractsConfig, the one part of abi/ that reads files (config.h): the config
// and, through ParseContractsConfig's reader, the ABI files it names.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "abi/config.h"

namespace gapless::abi {
namespace {

// The whole file, or a message saying why not (without the path).
Result<std::string> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return FailedPrecondition("is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return FailedPrecondition(std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return FailedPrecondition("read failed");
  return text.str();
}

}  // namespace

Result<ContractsConfig> LoadContractsConfig(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) {
    return FailedPrecondition("contracts config " + path + ": " + text.status().message());
  }
  return ParseContractsConfig(*text, path, ReadWholeFile);
}

}  // namespace gapless::abi
