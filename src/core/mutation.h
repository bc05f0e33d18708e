// mutation: build-time switches that disable one safety check each, for the chaos harness's
// mutation checks only (issue 16 item 4): a harness that cannot catch a deliberately broken check
// proves nothing. A build configured with -DGAPLESS_MUTATION=<name> has exactly that check
// compiled out; every other build (the default, every release) has none, and Mutated() is a
// constant false that the compiler folds away.
//
// The names (where the check is):
//   fence            the writer's fencing-token check (store/writer.cc)
//   lease-owner      the queue's lease owner check on complete (coord/lua/queue_lib.lua)
//   head-log-height  the head log's height uniqueness (coord/lua, write-block)
//   reorg-floor      the writer's re-org fence floor (store/writer.cc)
//   relay-contiguity the relay's refusal to step over a block without an outbox row
//                    (node/relay.cc)
//
// Thread-safety: constants only.
#pragma once

#include <string_view>

namespace gapless {

#ifdef GAPLESS_MUTATION
inline constexpr std::string_view kMutation = GAPLESS_MUTATION;
#else
inline constexpr std::string_view kMutation = "";
#endif

// True when `check` is the one compiled out.
constexpr bool Mutated(std::string_view check) { return !kMutation.empty() && kMutation == check; }

}  // namespace gapless
