// failpoint: named points in the code where a test can make a real process misbehave on purpose,
// at an exact moment no outside signal could hit reliably (after FoundationDB's BUGGIFY, etcd's
// gofail). Armed only through the environment variable GAPLESS_FAILPOINTS, a comma-separated list
// of names, read once at the first query; unset (every production run) a point costs a check of
// a null pointer. "name@N" arms a point to fire the Nth time it is reached rather than the first.
//
// The points:
//   worker-stop-before-write  the worker raises SIGSTOP on itself after its last lease renewal and
//                             before its fenced write (node/worker.cc, worker_prefetch.cc), once
//                             per process: the moment a GC pause or a SIGSTOP would make the fence
//                             the only guard. tests/devnet_itest.cc resumes it with SIGCONT after
//                             its lease expired and another worker committed the range.
//   worker-stop-before-complete  the worker raises SIGSTOP on itself after its write committed and
//                             before it completes the task (node/worker.cc), once per process: the
//                             moment only the queue's lease-owner check keeps a revoked holder from
//                             recording its range as completed. The chaos harness re-orgs under
//                             the range, and resumes it while another worker holds the new lease.
#pragma once

#include <string_view>

namespace gapless {

// True the first time `name` is reached while armed (the Nth with "name@N"); false before and
// afterwards, and whenever it is not armed. Thread-safe.
bool FailpointFiresOnce(std::string_view name);

}  // namespace gapless
