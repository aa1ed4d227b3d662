// AllocateJobId: ALLOC_JOB / ALLOC_ACK with the fabric (see job_alloc.h).
#include "ina/host/job_alloc.h"

#include <chrono>
#include <random>
#include <string>

#include "exchange.h"
#include "ina/host/transport.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"

namespace ina::host {

using std::chrono::milliseconds;

Result<uint16_t> AllocateJobId(const CommConfig& config) {
  // Validate what is used; job/rank/world are irrelevant here, so check a copy with neutral ones.
  CommConfig c = config;
  c.rank = 0;
  c.world_size = 1;
  INA_RETURN_IF_ERROR(c.Validate());
  const std::string who =
      "allocate a job id at " + c.switch_host + ":" + std::to_string(c.switch_port);
  TransportConfig tc;
  tc.kind = c.transport;
  tc.fabric_host = c.switch_host;
  tc.fabric_port = c.switch_port;
  tc.socket_buffer_bytes = 0;  // a handful of header-only packets
  tc.dpdk = c.dpdk;
  if (c.transport == "dpdk" && c.progress_threads > 1) {  // lane 0's port (validated above)
    tc.dpdk.port = DpdkLanePorts(c.dpdk.port, c.progress_threads)[0];
  }
  tc.verbs = c.verbs;
  auto made = MakeTransport(tc);
  if (!made.ok()) return made.status().WithContext(who);
  Transport& t = **made;

  std::random_device rd;
  const auto nonce = static_cast<uint16_t>(rd());
  uint8_t req[proto::MessageBytes(0)] = {};
  // A random hint: a fabric of several cores steers by the job field, so requests spread over its
  // cores; the same value in every resend keeps them on one.
  proto::AllocJobMsg{.hint = static_cast<uint16_t>(rd()), .nonce = nonce}.Encode(req);
  proto::SealMessage(req, proto::kHeaderBytes);
  internal::ExchangeSpec spec;
  spec.request = req;
  spec.timeout = milliseconds(c.join_timeout_ms);
  spec.is_reply = [&](const proto::Header& a) {
    // Both answers echo the nonce in gen (alloc_ack's nonce; the refusal copies the request's).
    return a.gen == nonce &&
           ((a.type == proto::MsgType::kError && a.job == 0) ||
            (a.type == proto::MsgType::kAllocAck && a.job >= proto::kAllocJobMin));
  };
  spec.who = who;
  spec.no_answer =
      "no alloc_ack within " + std::to_string(c.join_timeout_ms) + " ms (is the switch running?)";
  INA_ASSIGN_OR_RETURN(const proto::Header a, internal::Exchange(t, spec));
  if (a.type == proto::MsgType::kError) {
    return ResourceExhausted(who + ": fabric answered error(" +
                             std::string(proto::ErrorCodeName(proto::ErrorMsg::From(a).code)) +
                             "): no job id free or too many reservations");
  }
  return a.job;
}

}  // namespace ina::host
