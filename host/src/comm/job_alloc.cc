// AllocateJobId: ALLOC_JOB / ALLOC_ACK with the fabric (see job_alloc.h).
#include "ina/host/job_alloc.h"

#include <array>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ina/host/transport.h"
#include "ina/proto/wire.h"

namespace ina::host {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr milliseconds kResend{100};
constexpr size_t kBurst = 8;
constexpr size_t kRxBufBytes = 2048;

}  // namespace

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
  auto made = MakeTransport(tc);
  if (!made.ok()) return made.status().WithContext(who);
  Transport& t = **made;

  std::random_device rd;
  const auto nonce = static_cast<uint16_t>(rd());
  uint8_t req[proto::kHeaderBytes] = {};
  proto::Header h;
  h.version = proto::kVersion;
  h.type = static_cast<uint8_t>(proto::MsgType::kAllocJob);
  h.gen = nonce;
  // A random hint: a fabric of several cores steers by the job field, so requests spread over its
  // cores; the same value in every resend keeps them on one.
  h.job = static_cast<uint16_t>(rd());
  proto::EncodeHeader(h, req);
  const TxPacket tx{req, sizeof(req)};

  std::vector<uint8_t> bufs(kBurst * kRxBufBytes);
  std::array<RxPacket, kBurst> rx{};
  Status last_error;
  const auto deadline = Clock::now() + milliseconds(c.join_timeout_ms);
  auto next_send = Clock::now();
  while (true) {
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string m = who + ": no alloc_ack within " + std::to_string(c.join_timeout_ms) +
                      " ms (is the switch running?)";
      if (!last_error.ok()) m += "; last transport error: " + last_error.ToString();
      return DeadlineExceeded(m);
    }
    if (now >= next_send) {
      auto r = t.SendBurst(std::span(&tx, 1));
      if (!r.ok()) {
        if (r.status().code() != StatusCode::kUnavailable) return r.status().WithContext(who);
        last_error = r.status();
      }
      next_send = now + kResend;
    }
    const auto until = std::min(next_send, deadline);
    const auto wait = std::chrono::duration_cast<microseconds>(until - now);
    for (size_t i = 0; i < kBurst; ++i) rx[i] = {bufs.data() + i * kRxBufBytes, kRxBufBytes, 0};
    auto r = t.RecvBurst(std::span(rx.data(), kBurst), std::max(wait, microseconds(0)));
    if (!r.ok()) {
      if (r.status().code() != StatusCode::kUnavailable) return r.status().WithContext(who);
      last_error = r.status();  // not up (yet): wait for the next resend
      std::this_thread::sleep_until(until);
      continue;
    }
    for (size_t i = 0; i < *r; ++i) {
      if (rx[i].len < proto::kHeaderBytes) continue;
      const proto::Header a = proto::DecodeHeader(rx[i].data);
      if (a.version != proto::kVersion || a.gen != nonce) continue;
      if (a.type == static_cast<uint8_t>(proto::MsgType::kError) && a.job == 0) {
        return ResourceExhausted(who + ": fabric answered error(" +
                                 std::string(proto::ErrorCodeName(a.aux)) +
                                 "): no job id free or too many reservations");
      }
      if (a.type == static_cast<uint8_t>(proto::MsgType::kAllocAck) &&
          a.job >= proto::kAllocJobMin) {
        return a.job;
      }
    }
  }
}

}  // namespace ina::host
