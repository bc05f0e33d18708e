// mutation: switches that disable one safety check each, for the chaos harness's mutation checks
// only (issue 16 item 4): a harness that cannot catch a deliberately broken check proves nothing.
//
// Compiled in only by the build option -DGAPLESS_MUTATIONS=ON (a test build of its own, e.g.
// build-mutations/). In such a build, the environment variable GAPLESS_MUTATION names the one
// check to skip (read once); the chaos harness sets it for the gapless processes it starts
// (gapless-chaos --mutation NAME). Every other build — the default, every release, the test
// suite's — has no switch at all: Mutated() is a constant false that the compiler folds away.
//
// The names (where the check is):
//   fence            the writer's fencing-token check (store/writer.cc)
//   reorg-floor      the writer's re-org fence floor (store/writer.cc)
//   relay-contiguity the relay's refusal to step over a block without an outbox row
//                    (node/relay.cc)
//   lease-owner      the work queue's lease-owner check: complete, renew and fail of a leased
//                    task by a worker whose (worker, token) is not that lease are applied
//                    instead of refused (a task with no lease is still refused)
//                    (coord/lua/queue_lib.lua check_owner, which complete-claim shares;
//                    queue_renew.lua; queue_fail.lua)
//   head-log-height  the head log's refusal of a second hash at a height it already stores
//                    (CONFLICT): the entry is appended beside the first, so two hashes at one
//                    height can both reach a quorum (coord/lua/election_write_head.lua)
//
// The Lua checks are dropped from the script text when the scripts are loaded (LoadScript,
// coord/redis_script.cc): in the .lua file the check is the lines from "-- mutation: NAME" to
// "-- end mutation: NAME", and a mutation build run with GAPLESS_MUTATION=NAME blanks them (the
// script then runs under the changed text's SHA1). Other builds load the files unchanged.
//
// Thread-safety: Mutated is thread-safe.
#pragma once

#include <string_view>

namespace gapless {

#ifdef GAPLESS_MUTATIONS
// True when `check` is the one GAPLESS_MUTATION names.
bool Mutated(std::string_view check);
#else
constexpr bool Mutated(std::string_view) { return false; }
#endif

}  // namespace gapless
