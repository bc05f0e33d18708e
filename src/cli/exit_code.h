// exit_code: how a gapless command's end becomes the process's exit code, the table that --help's
// footer, the README ("Using it") and docs/operations.md give:
//   0    done
//   1    an error (logged), or problems found (verify)
//   2    bad input, an error a human must fix: a flag, variable, config line or URL (refused before
//        anything is contacted, cli/input_checks.h), or FailedPrecondition from the command (the
//        wrong chain, a dead-lettered range)
//   130  stopped by SIGINT/SIGTERM
#pragma once

#include "cli/input_checks.h"
#include "core/status.h"
#include "node/commands.h"

namespace gapless::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = kExitBadInput;  // cli/input_checks.h: one code for bad input
inline constexpr int kExitInterrupted = 130;

// The exit code for how a command ended; a failure is logged (spdlog) first.
int ExitCode(const Result<Outcome>& result);

}  // namespace gapless::cli
