// Status: the result of an operation, with a code that tells the caller what to do next.
//
// The codes carry the retry policy (after abseil's canonical codes):
//   kUnavailable        retry the same call (network failure, HTTP 429/5xx, timeout)
//   kAborted            retry the unit of work (lease lost, stale fencing token, serialization
//   failure) kInvalidData        the input was malformed or inconsistent (bad RPC answer); retry
//   the unit of
//                       work a bounded number of times, then stop or dead-letter it, naming the
//                       field
//   kFailedPrecondition stop until a human fixes something (bad config, wrong chain id, schema
//   mismatch) kNotFound           the thing asked for does not exist (yet), e.g. a block above the
//   head kDataLoss           an invariant is broken; alert and stop kInternal           a bug
// Status and Result are value types; not thread-safe to share mutably, safe to copy.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace gapless {

enum class Code {
  kOk = 0,
  kUnavailable,
  kAborted,
  kInvalidData,
  kFailedPrecondition,
  kNotFound,
  kDataLoss,
  kInternal,
};

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // True when retrying the same call (or the same unit of work) may succeed.
  bool retriable() const {
    return code_ == Code::kUnavailable || code_ == Code::kAborted || code_ == Code::kInvalidData;
  }

  // "Unavailable: connect to 127.0.0.1:8545 failed: Connection refused"
  std::string ToString() const;

  // Prefixes the message with context, keeping the code and reason: "block 17: " + message.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    Status out(code_, context + ": " + message_);
    out.reason_ = reason_;
    return out;
  }

  // A machine-readable refinement of code(), for the few callers that must tell two errors of one
  // code apart (a fenced-off write from a serialization failure, both Aborted): they compare
  // reason(), never parse message(). Empty unless the producer set one. The values are defined by
  // their producers, e.g. PgSqlStateReason() in store/pg.h, kStaleFenceReason in store/writer.h.
  const std::string& reason() const { return reason_; }
  Status WithReason(std::string reason) const {
    Status out = *this;
    if (!out.ok()) out.reason_ = std::move(reason);
    return out;
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::string reason_;
};

inline Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
inline Status Aborted(std::string m) { return Status(Code::kAborted, std::move(m)); }
inline Status InvalidData(std::string m) { return Status(Code::kInvalidData, std::move(m)); }
inline Status FailedPrecondition(std::string m) {
  return Status(Code::kFailedPrecondition, std::move(m));
}
inline Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
inline Status DataLoss(std::string m) { return Status(Code::kDataLoss, std::move(m)); }
inline Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

// Result<T>: a T or a non-ok Status. A small stand-in for std::expected (C++23).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "Result constructed from an ok Status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace gapless

// Evaluates expr (a Status); returns it from the enclosing function if not ok.
#define GAPLESS_RETURN_IF_ERROR(expr) \
  do {                                \
    ::gapless::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)

#define GAPLESS_CONCAT_INNER(a, b) a##b
#define GAPLESS_CONCAT(a, b) GAPLESS_CONCAT_INNER(a, b)
// GAPLESS_ASSIGN_OR_RETURN(auto x, MakeX()): declares x from a Result or returns its Status.
#define GAPLESS_ASSIGN_OR_RETURN(lhs, expr)                                                   \
  auto GAPLESS_CONCAT(_res_, __LINE__) = (expr);                                              \
  if (!GAPLESS_CONCAT(_res_, __LINE__).ok()) return GAPLESS_CONCAT(_res_, __LINE__).status(); \
  lhs = std::move(GAPLESS_CONCAT(_res_, __LINE__)).value()
