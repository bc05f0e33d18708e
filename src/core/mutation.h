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
