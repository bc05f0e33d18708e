#include "store/notify.h"

#include <chrono>
#include <thread>

namespace gapless {

Result<std::unique_ptr<PgWaker>> PgWaker::Open(const std::string& url,
                                               std::vector<std::string> channels,
                                               const PgConnectOptions& options) {
  GAPLESS_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> conn, PgConn::Connect(url, options));
  std::unique_ptr<PgWaker> waker(new PgWaker(std::move(conn), std::move(channels)));
  GAPLESS_RETURN_IF_ERROR(waker->Listen());
  return waker;
}

Status PgWaker::Listen() {
  std::string sql;
  for (const std::string& c : channels_) sql += "LISTEN " + c + ";";
  GAPLESS_RETURN_IF_ERROR(conn_->Exec(sql));
  listening_session_ = conn_->session_id() + 1;  // +1: session ids start at 0
  return Status::Ok();
}

bool PgWaker::Wait(int64_t timeout_ms) {
  if (listening_session_ != conn_->session_id() + 1 || conn_->broken()) {
    // LISTEN is session state: a reconnect dropped it.
    if (!Listen().ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
      return false;
    }
  }
  Result<bool> woke = conn_->WaitForNotification(timeout_ms);
  if (!woke.ok()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return false;
  }
  return *woke;
}

}  // namespace gapless
