// notify: PostgreSQL LISTEN/NOTIFY as a wake-up between the parts of gapless that wait for one
// another through the database, so that they react at once instead of at their next tick:
//
//   kRangeCommittedChannel  WriteRange notifies in its transaction (delivered at commit): a range
//                           is committed; the frontier duty can advance.
//   kFrontierChannel        PersistFrontier notifies when the frontier moved: the event relays
//                           can publish.
//
// A notification is only a hint: waiters still poll at their tick (a notification is lost while
// the listening connection is down, and NOTIFY has no payload we rely on).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/pg.h"

namespace gapless {

inline constexpr std::string_view kRangeCommittedChannel = "gapless_range_committed";
inline constexpr std::string_view kFrontierChannel = "gapless_frontier";

// A dedicated connection that LISTENs on `channels` and waits for them.
class PgWaker {
 public:
  // Connects (Unavailable when it cannot: callers fall back to plain sleeping) and LISTENs.
  static Result<std::unique_ptr<PgWaker>> Open(const std::string& url,
                                               std::vector<std::string> channels,
                                               const PgConnectOptions& options = {});
  // Waits up to timeout_ms; true when a notification arrived. On a broken connection it waits
  // out the timeout (as a sleep) and listens again at the next call.
  bool Wait(int64_t timeout_ms);

 private:
  PgWaker(std::unique_ptr<PgConn> conn, std::vector<std::string> channels)
      : conn_(std::move(conn)), channels_(std::move(channels)) {}
  Status Listen();

  std::unique_ptr<PgConn> conn_;
  std::vector<std::string> channels_;
  uint64_t listening_session_ = 0;  // conn_->session_id() when LISTEN was sent; 0: not yet
};

}  // namespace gapless
