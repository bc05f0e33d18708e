// failpoint: named points in the code where a test can make a real process misbehave on purpose,
// at an exact moment no outside signal could hit reliably (after FoundationDB's BUGGIFY, etcd's
// gofail). Armed only through the environment variable GAPLESS_FAILPOINTS, a comma-separated list
// of names, read once at the first query; unset (every production run) a point costs a check of
// a null pointer.
//
// The points:
//   worker-stop-before-write  the worker raises SIGSTOP on itself after its last lease renewal and
//                             before its fenced write (node/worker.cc), once per process: the
//                             moment a GC pause or a SIGSTOP would make the fence the only guard.
//                             tests/devnet_itest.cc resumes it with SIGCONT after its lease expired
//                             and another worker committed the range.
#pragma once

#include <string_view>

namespace gapless {

// True the first time `name` is reached while armed; false afterwards and whenever it is not
// armed. Thread-safe.
bool FailpointFiresOnce(std::string_view name);

}  // namespace gapless
