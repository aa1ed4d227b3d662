// Status and Result<T>: how ina's control paths report errors (library code does not throw).
//
// A Status is a code plus a human-readable message that says what failed and with what context
// ("udp: bind 127.0.0.1:47000: Address already in use"). Result<T> holds either a T or a non-OK
// Status. Both are cheap to move; neither allocates when OK.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ina {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something out of range
  kNotFound,
  kAlreadyExists,
  kResourceExhausted,  // out of slots, buffers, job table entries
  kFailedPrecondition,
  kUnavailable,       // peer unreachable, transport down
  kDeadlineExceeded,  // no progress within the configured time
  kAborted,           // the job was aborted (a peer left or failed)
  kDataLoss,
  kInternal,
  kUnimplemented,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "DEADLINE_EXCEEDED: ..." or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: message" (same code).
  Status WithContext(std::string_view context) const;

  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

// Status from errno: "what: strerror(err)", code chosen from err.
Status ErrnoStatus(std::string_view what, int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ina

#define INA_CONCAT_INNER_(a, b) a##b
#define INA_CONCAT_(a, b) INA_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define INA_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::ina::Status ina_status_ = (expr);        \
    if (!ina_status_.ok()) return ina_status_; \
  } while (0)

// `INA_ASSIGN_OR_RETURN(auto x, F())`: declares x from F()'s value, or returns its Status.
#define INA_ASSIGN_OR_RETURN(lhs, expr) \
  INA_ASSIGN_OR_RETURN_IMPL_(INA_CONCAT_(ina_result_, __LINE__), lhs, expr)
#define INA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
