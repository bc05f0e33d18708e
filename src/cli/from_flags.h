// from_flags: each subcommand's wiring. Its flags (cli/args.h) become the options struct of its
// entry function in node/commands.h, which builds what the command needs and runs it: cli/ turns
// flags into options, node/ wires the modules (the one composition root). A value CLI11 cannot
// check alone (a block bound, an export table, --traces with --source kafka, leader --workers) is
// checked here and named in the error, which ends with exit code 2. Called once per process, after
// parsing and logging set-up; not thread-safe.
#pragma once

#include "cli/args.h"

namespace gapless::cli {

// Runs the one subcommand CLI11 parsed, with the flags in `a`, and returns the process's exit code
// (cli/exit_code.h); a failure is logged first.
int RunParsedSubcommand(const Subcommands& sub, const Args& a);

}  // namespace gapless::cli
