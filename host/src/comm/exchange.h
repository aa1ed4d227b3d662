// A control request resent until the fabric answers it, on the real clock: job-id allocation's
// and key installation's (job_alloc.cc), and the hello of switch_cores auto (communicator.cc). The
// join handshake is a state machine of its own (membership.h).
// TODO(#25): ALLOC_JOB as a state machine driven like Membership, and this loop gone.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <span>
#include <string>

#include "ina/base/status.h"
#include "ina/host/transport.h"
#include "ina/proto/wire.h"

namespace ina::host::internal {

struct ExchangeSpec {
  std::span<const uint8_t> request;  // one header-only message with its trailer, sent as is
  std::chrono::milliseconds resend{100};
  std::chrono::milliseconds timeout{10000};
  // True for the reply that ends the exchange (only headers of this version whose CRC32C trailer
  // matches reach it; a damaged reply is ignored and the next resend gets another).
  std::function<bool(const proto::Header&)> is_reply;
  std::string who;        // context for every error ("join job 7 as rank 0 of 2 at ...")
  std::string no_answer;  // the DeadlineExceeded text after `who` ("no join_ack within ... ms")
  const std::atomic<bool>* cancel = nullptr;  // set: stop with Aborted

  ExchangeSpec WithTimeout(std::chrono::milliseconds t) const {
    ExchangeSpec s = *this;
    s.timeout = t;
    return s;
  }
};

// Sends spec.request every spec.resend until a received header satisfies is_reply (returned),
// spec.timeout (DeadlineExceeded naming the last transport error) or cancel (Aborted). A fabric
// that is not up yet (Unavailable from the transport) is retried; other transport errors are
// returned with `who` as context. Blocks up to spec.timeout.
Result<proto::Header> Exchange(Transport& t, const ExchangeSpec& spec);

}  // namespace ina::host::internal
