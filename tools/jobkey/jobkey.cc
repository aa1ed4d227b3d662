// ina-jobkey: installs a job's secret in an ina switch over its admin channel (docs/security.md).
//
//   ina-jobkey --switch ADDR:PORT --admin-key-file FILE --job N --secret-file FILE
//              [--mode mac|mac_encrypt] [--timeout-ms MS] [--cores N]
//
// Both files hold hex secrets and must be readable by their owner only (proto::LoadSecretFile);
// no secret is ever taken from the command line or printed. Sends one set_key (proto::SealSetKey)
// sealed under the admin key, its sequence from the wall clock (proto::SetKeySequence: it grows
// from one run to the next, and a switch refuses one older than its own start), and waits for the
// switch's set_key_ack; resends up to 5 times. With --cores N (a switch of `--cores N --core-ports
// 1`, whose workers run INA_SWITCH_CORES=N) it installs the key at each core, PORT + c, since each
// core holds its share of the job with a key of its own. Exit 0: installed (at every core); 1: no
// acknowledgement (a wrong admin key looks the same: the switch drops what it cannot open); 2: bad
// usage or files; 3: the switch refused the mode (its engine cannot run it: error(key_refused)).
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ina/base/parse.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/sec.h"

namespace {

namespace p = ::ina::proto;

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "ina-jobkey: %s\nusage: ina-jobkey --switch ADDR:PORT --admin-key-file FILE --job N "
               "--secret-file FILE [--mode mac|mac_encrypt] [--timeout-ms MS] [--cores N]\n",
               why.c_str());
  return 2;
}

// A UDP socket connected to "host:port" or "[v6]:port", the port plus `offset`; -1 and a message
// on failure.
int Connect(const std::string& endpoint, uint64_t offset, std::string& error) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    error = "--switch " + endpoint + ": not ADDR:PORT";
    return -1;
  }
  std::string host = endpoint.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto port = ina::ParseUint("--switch's port", endpoint.substr(colon + 1), 1, 65535);
  if (!port.ok() || *port + offset > 65535) {
    error = "--switch " + endpoint + ": " +
            (port.ok() ? "core " + std::to_string(offset) + "'s port is past 65535"
                       : port.status().message());
    return -1;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(*port + offset).c_str(), &hints, &res);
  if (rc != 0) {
    error = "--switch " + endpoint + ": " + gai_strerror(rc);
    return -1;
  }
  const int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    error = "--switch " + endpoint + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return -1;
  }
  freeaddrinfo(res);
  return fd;
}

// Sends set_key over `fd` (connected to one switch core) until its set_key_ack: 0, or 1 when none
// came after 5 attempts, 2 when the message cannot be sealed, 3 when the switch refused the mode
// (error(key_refused)).
int Install(int fd, const std::vector<uint8_t>& admin, uint16_t job, p::SecMode mode,
            const std::vector<uint8_t>& secret, uint64_t timeout_ms) {
  int result = 1;
  for (uint64_t attempt = 0; attempt < 5 && result != 0; ++attempt) {
    // The clock at each attempt: another launcher may have moved the switch's floor meanwhile.
    const uint64_t seq = p::SetKeySequence(std::chrono::system_clock::now(), attempt);
    auto msg = p::SealSetKey(admin, job, mode, secret, seq);
    if (!msg.ok()) {
      result = Usage(msg.status().message());
      break;
    }
    if (send(fd, msg->data(), msg->size(), 0) < 0) {
      std::fprintf(stderr, "ina-jobkey: send: %s\n", std::strerror(errno));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (result != 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd pfd{fd, POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) break;
      uint8_t buf[256];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n != static_cast<ssize_t>(p::MessageBytes(0)) || !p::MessageCrcOk({buf, size_t(n)})) {
        continue;
      }
      const auto ack = p::SetKeyAckMsg::Decode(buf);
      if (p::IsType(buf, p::MsgType::kSetKeyAck) && ack.job == job &&
          p::SetKeySeq(ack) == (seq & 0xFFFFFFFFFFFFull)) {
        result = 0;
      }
      const auto refused = p::ErrorMsg::Decode(buf);
      if (p::IsType(buf, p::MsgType::kError) && refused.code == p::ErrorCode::kKeyRefused &&
          refused.job == job && p::SetKeySeq(refused) == (seq & 0xFFFFFFFFFFFFull)) {
        return 3;  // the switch cannot take this mode: no attempt will do better
      }
    }
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  std::string endpoint, admin_file, secret_file, mode_name = "mac";
  uint64_t job = 65536, timeout_ms = 400, cores = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) return Usage(std::string(flag) + " needs a value");
    const std::string v = argv[++i];
    if (flag == "--switch") {
      endpoint = v;
    } else if (flag == "--admin-key-file") {
      admin_file = v;
    } else if (flag == "--secret-file") {
      secret_file = v;
    } else if (flag == "--mode") {
      mode_name = v;
    } else if (flag == "--cores") {
      auto x = ina::ParseUint(flag, v, 1, 64);
      if (!x.ok()) return Usage(x.status().message());
      cores = *x;
    } else if (flag == "--job" || flag == "--timeout-ms") {
      auto x =
          flag == "--job" ? ina::ParseUint(flag, v, 0, 65535) : ina::ParseUint(flag, v, 1, 60000);
      if (!x.ok()) return Usage(x.status().message());
      (flag == "--job" ? job : timeout_ms) = *x;
    } else {
      return Usage("unknown flag " + std::string(flag));
    }
  }
  if (endpoint.empty() || admin_file.empty() || secret_file.empty() || job > 65535) {
    return Usage("--switch, --admin-key-file, --job and --secret-file are required");
  }
  if (mode_name != "mac" && mode_name != "mac_encrypt") {
    return Usage("--mode " + mode_name + ": mac or mac_encrypt");
  }
  const p::SecMode mode = mode_name == "mac" ? p::SecMode::kMac : p::SecMode::kMacEncrypt;
  auto admin = p::LoadSecretFile(admin_file, "--admin-key-file");
  if (!admin.ok()) return Usage(admin.status().message());
  auto secret = p::LoadSecretFile(secret_file, "--secret-file");
  if (!secret.ok()) return Usage(secret.status().message());
  if (secret->size() % p::kElemBytes != 0) {
    return Usage("--secret-file " + secret_file + ": a whole number of 4-byte words");
  }
  // Every core's socket first, so a bad endpoint or --cores is bad usage before anything is sent.
  std::vector<int> fds;
  std::string error;
  for (uint64_t core = 0; core < cores && error.empty(); ++core) {
    const int fd = Connect(endpoint, core, error);
    if (fd >= 0) fds.push_back(fd);
  }
  int result = error.empty() ? 0 : Usage(error);
  for (size_t core = 0; core < fds.size() && result == 0; ++core) {
    result = Install(fds[core], *admin, static_cast<uint16_t>(job), mode, *secret, timeout_ms);
    if (result == 1) {
      std::fprintf(
          stderr,
          "ina-jobkey: no set_key_ack from %s%s (switch down, no --admin-key-file, or "
          "another admin key)\n",
          endpoint.c_str(),
          cores > 1
              ? (" core " + std::to_string(core) + " (port + " + std::to_string(core) + ")").c_str()
              : "");
    } else if (result == 3) {
      std::fprintf(
          stderr,
          "ina-jobkey: %s%s refused job %llu's key (error(key_refused)): its engine "
          "cannot run sec mode %s (docs/security.md)\n",
          endpoint.c_str(),
          cores > 1
              ? (" core " + std::to_string(core) + " (port + " + std::to_string(core) + ")").c_str()
              : "",
          static_cast<unsigned long long>(job), mode_name.c_str());
    }
  }
  for (const int fd : fds) close(fd);
  std::fill(secret->begin(), secret->end(), uint8_t{0});
  std::fill(admin->begin(), admin->end(), uint8_t{0});
  if (result == 0) {
    std::printf("ina-jobkey: job %llu's key installed (%s)%s\n",
                static_cast<unsigned long long>(job), mode_name.c_str(),
                cores > 1 ? (" at " + std::to_string(cores) + " switch cores").c_str() : "");
  }
  return result;
}
