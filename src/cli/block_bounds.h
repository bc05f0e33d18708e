// block_bounds: the --from / --to flag values of the gapless binary, checked for their syntax
// before anything is contacted. Tags (latest, safe, finalized, 0x-hex) are resolved later by the
// node (node/app.h CheckChain), "max" by the database. Pure functions.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "cli/layered_args.h"
#include "core/status.h"
#include "node/app.h"

namespace gapless {

// --from / --to of index, run and worker: a decimal block number, or latest|safe|finalized|0x...
// for the node to resolve. FailedPrecondition naming `flag` otherwise (also for a number above
// 2^64 - 1).
Result<BlockBound> ParseBlockBound(const std::string& text, const std::string& flag);

// --to of verify and export: a decimal block number, or "max" (nullopt: the highest indexed
// block). FailedPrecondition naming --to otherwise.
Result<std::optional<uint64_t>> ParseUpperBound(const std::string& text);

// Checks the given --from and --to of `sub` (a parsed subcommand) before anything starts:
// ParseUpperBound for verify's and export's --to, ParseBlockBound for the other block-bound flags
// (index, run, leader, worker, produce; numeric ones are cli/input_checks.h CheckNumbers'). The
// error ends with where the value came from, like every other option's: " (from GAPLESS_TO)",
// " (from config file F line N)".
Status CheckBlockBounds(const CLI::App& sub, const ValueOrigins& origins);

}  // namespace gapless
