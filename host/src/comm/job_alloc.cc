// AllocateJobId: ALLOC_JOB / ALLOC_ACK with the fabric (see job_alloc.h).
#include "ina/host/job_alloc.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "communicator_factory.h"
#include "exchange.h"
#include "ina/host/transport.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "lane_transport.h"
#include "mode_refusal.h"

namespace ina::host {

using std::chrono::milliseconds;

namespace {

// The transport of a one-off exchange with the fabric: lane `lane`'s (lane 0, or with lanes on
// switch cores the lane of that core), without the data path's socket buffers.
Result<std::unique_ptr<Transport>> ControlTransport(const CommConfig& c, int lane = 0) {
  TransportConfig tc = internal::LaneTransportConfig(c, lane);
  tc.socket_buffer_bytes = 0;  // a handful of header-only packets
  return MakeTransport(tc);
}

}  // namespace

Result<uint16_t> AllocateJobId(const CommConfig& config) {
  // Validate what is used; job/rank/world and the job's security are irrelevant here (a keyed
  // job's launcher makes its secret after this), so check a copy with neutral ones.
  CommConfig c = config;
  c.rank = 0;
  c.world_size = 1;
  c.sec = "crc";
  c.job_secret = JobSecret();
  INA_RETURN_IF_ERROR(c.Validate());
  const std::string who =
      "allocate a job id at " + c.switch_host + ":" + std::to_string(c.switch_port);
  auto made = ControlTransport(c);
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
  INA_ASSIGN_OR_RETURN(const proto::Header a,
                       internal::RunExchange(t, spec, internal::SteadyClock()));
  if (a.type == proto::MsgType::kError) {
    return ResourceExhausted(who + ": fabric answered error(" +
                             std::string(proto::ErrorCodeName(proto::ErrorMsg::From(a).code)) +
                             "): no job id free or too many reservations");
  }
  return a.job;
}

Result<JobSecret> MakeJobSecret() {
  std::array<uint8_t, 32> b{};
  INA_RETURN_IF_ERROR(proto::RandomBytes(b));
  JobSecret s(b);
  std::fill(b.begin(), b.end(), uint8_t{0});
  return s;
}

namespace {

// InstallJobKey at one switch core: lane `lane`'s transport, until set_key_ack or `deadline`.
Status InstallAtLane(const CommConfig& c, int lane, proto::SecMode mode,
                     std::span<const uint8_t> admin_secret, const JobSecret& secret,
                     std::chrono::steady_clock::time_point deadline) {
  const uint16_t job = c.job_id;
  const uint16_t port =
      c.switch_cores > 1 ? static_cast<uint16_t>(c.switch_port + lane) : c.switch_port;
  std::string who = "install job " + std::to_string(job) + "'s key at " + c.switch_host + ":" +
                    std::to_string(port);
  if (c.switch_cores > 1) {
    who += " (switch core " + std::to_string(lane) + " of " + std::to_string(c.switch_cores) + ")";
  }
  auto made = ControlTransport(c, lane);
  if (!made.ok()) return made.status().WithContext(who);
  Transport& t = **made;
  // Each attempt seals a new sequence from the clock at that moment: the switch takes only
  // sequences above the last one it accepted from anyone, and another launcher (another NCCL node,
  // another group's rank 0) may have installed a key a moment ago. An attempt waits 300 ms for the
  // ack (its request resent every 100 ms); a resend of a request the switch already took is a
  // replay it ignores, so a lost ack costs one attempt.
  const auto per_attempt = std::min(milliseconds(300), milliseconds(c.join_timeout_ms));
  Status last = DeadlineExceeded(who + ": no time left for it within " +
                                 std::to_string(c.join_timeout_ms) + " ms");
  for (uint64_t attempt = 0; std::chrono::steady_clock::now() < deadline; ++attempt) {
    const uint64_t seq = proto::SetKeySequence(std::chrono::system_clock::now(),
                                               attempt % proto::kSetKeyAttemptsPerMs);
    auto msg = proto::SealSetKey(admin_secret, job, mode, secret.bytes(), seq);
    if (!msg.ok()) return msg.status().WithContext(who);
    internal::ExchangeSpec spec;
    spec.request = *msg;
    spec.timeout = per_attempt;
    // The ack, or the switch's refusal of this key's mode (error(key_refused)), which ends it.
    spec.is_reply = [&](const proto::Header& a) {
      if (a.type == proto::MsgType::kError) {
        const auto e = proto::ErrorMsg::From(a);
        return e.code == proto::ErrorCode::kKeyRefused && e.job == job &&
               proto::SetKeySeq(e) == seq;
      }
      const auto ack = proto::SetKeyAckMsg::From(a);
      return a.type == proto::MsgType::kSetKeyAck && ack.job == job && proto::SetKeySeq(ack) == seq;
    };
    spec.who = who;
    spec.no_answer = "no set_key_ack within " + std::to_string(c.join_timeout_ms) +
                     " ms (is the switch running with --admin-key-file, and is INA_ADMIN_KEY its "
                     "admin secret?)";
    auto got = internal::RunExchange(t, spec, internal::SteadyClock());
    std::fill(msg->begin(), msg->end(), uint8_t{0});
    if (got.ok() && got->type == proto::MsgType::kError) {
      return Unimplemented(who + ": the switch refused it (error(key_refused)): " +
                           internal::CannotRunSecMode(proto::ErrorMsg::From(*got).key_mode()));
    }
    if (got.ok()) return Status::Ok();
    last = got.status();
    if (last.code() != StatusCode::kDeadlineExceeded) return last;
  }
  return last;
}

}  // namespace

Status InstallJobKey(const CommConfig& config, uint16_t job, std::span<const uint8_t> admin_secret,
                     const JobSecret& secret) {
  CommConfig c = config;
  c.rank = 0;
  c.world_size = 1;
  c.job_id = job;
  c.job_secret = secret;
  INA_RETURN_IF_ERROR(c.Validate());
  if (c.sec == "crc") return InvalidArgument("install a job key: sec is crc (no key to install)");
  const proto::SecMode mode = c.sec == "mac" ? proto::SecMode::kMac : proto::SecMode::kMacEncrypt;
  // Lanes on switch cores: each core holds its share of the job as a job of its own, with a key
  // of its own, so every core gets the secret (each refuses the job's JOINs until it has it).
  // switch_cores auto: the cores the workers will find (they ask the same switch the same way).
  if (c.switch_cores == CommConfig::kSwitchCoresAuto) {
    INA_RETURN_IF_ERROR(internal::AskSwitchCores(&c));
  }
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(c.join_timeout_ms);
  for (int core = 0; core < c.switch_cores; ++core)
    INA_RETURN_IF_ERROR(InstallAtLane(c, core, mode, admin_secret, secret, deadline));
  return Status::Ok();
}

Result<JobSecret> MakeAndInstallJobKey(const CommConfig& config, uint16_t job,
                                       std::span<const uint8_t> admin_secret) {
  INA_ASSIGN_OR_RETURN(JobSecret secret, MakeJobSecret());
  INA_RETURN_IF_ERROR(InstallJobKey(config, job, admin_secret, secret));
  return secret;
}

Result<JobSecret> AdminSecretFromEnv(const CommConfig& config, const std::string& who) {
  const char* spec = std::getenv("INA_ADMIN_KEY");
  if (spec == nullptr) {
    return FailedPrecondition("INA_JOB_SEC=" + config.sec + " without INA_JOB_KEY: " + who +
                              " installs the job's secret at the switch, which needs the "
                              "switch's admin secret: INA_ADMIN_KEY=FILE (mode 0600) or fd:N "
                              "(docs/security.md)");
  }
  return LoadJobSecret(spec, "INA_ADMIN_KEY");
}

Status InstallJobKeyAtOwnSwitch(const CommConfig& config, uint16_t job, const JobSecret& secret,
                                const std::string& who) {
  const std::string at = config.switch_host + ":" + std::to_string(config.switch_port);
  INA_ASSIGN_OR_RETURN(JobSecret admin, AdminSecretFromEnv(config, who + " (at " + at + ")"));
  const Status st = InstallJobKey(config, job, admin.bytes(), secret);
  admin.Wipe();
  return st.WithContext(who + ": job " + std::to_string(job) + "'s key at " + at);
}

}  // namespace ina::host
