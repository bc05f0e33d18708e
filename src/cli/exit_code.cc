// exit_code.cc: the mapping from a command's Result<Outcome> to the exit code (cli/exit_code.h).
#include "cli/exit_code.h"

#include <spdlog/spdlog.h>

namespace gapless::cli {

int ExitCode(const Result<Outcome>& result) {
  if (!result.ok()) {
    spdlog::error("{}", result.status().ToString());
    return result.status().code() == Code::kFailedPrecondition ? kExitUsage : kExitError;
  }
  switch (*result) {
    case Outcome::kDone:
      return kExitOk;
    case Outcome::kStopped:
      return kExitInterrupted;
    case Outcome::kProblemsFound:
      return kExitError;
  }
  return kExitError;
}

}  // namespace gapless::cli
