// VerbsConfig validation and INA_VERBS_* parsing: built with or without libibverbs.
#include <cerrno>
#include <cstdlib>
#include <string>

#include "ina/host/transport.h"

namespace ina::host {
namespace {

Result<long long> EnvInt(const char* var, long long lo, long long hi, int base = 10) {
  const char* v = std::getenv(var);
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, base);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    return InvalidArgument(std::string(var) + "='" + v + "': not an integer in [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

}  // namespace

Status ApplyVerbsEnv(VerbsConfig* c) {
  if (const char* v = std::getenv("INA_VERBS_DEVICE")) c->device = v;
  if (std::getenv("INA_VERBS_PORT")) {
    INA_ASSIGN_OR_RETURN(long long x, EnvInt("INA_VERBS_PORT", 1, 255));
    c->port = static_cast<int>(x);
  }
  if (std::getenv("INA_VERBS_GID")) {
    INA_ASSIGN_OR_RETURN(long long x, EnvInt("INA_VERBS_GID", -1, 255));
    c->gid_index = static_cast<int>(x);
  }
  if (std::getenv("INA_VERBS_MTU")) {
    INA_ASSIGN_OR_RETURN(long long x, EnvInt("INA_VERBS_MTU", 0, 4096));
    c->mtu = static_cast<int>(x);
  }
  if (std::getenv("INA_VERBS_QPN")) {
    INA_ASSIGN_OR_RETURN(long long x, EnvInt("INA_VERBS_QPN", 0, 0xFFFFFF, 0));
    c->remote_qpn = static_cast<uint32_t>(x);
  }
  if (std::getenv("INA_VERBS_QKEY")) {
    INA_ASSIGN_OR_RETURN(long long x, EnvInt("INA_VERBS_QKEY", 0, 0xFFFFFFFFLL, 0));
    c->qkey = static_cast<uint32_t>(x);
  }
  return ValidateVerbsConfig(*c);
}

Status ValidateVerbsConfig(const VerbsConfig& c) {
  if (c.port < 1 || c.port > 255) {
    return InvalidArgument("verbs: port " + std::to_string(c.port) + " not in [1, 255]");
  }
  if (c.gid_index < -1 || c.gid_index > 255) {
    return InvalidArgument("verbs: gid_index " + std::to_string(c.gid_index) +
                           " not in [-1, 255] (-1: the first RoCE v2 IPv4 GID)");
  }
  if (c.mtu != 0 && c.mtu != 256 && c.mtu != 512 && c.mtu != 1024 && c.mtu != 2048 &&
      c.mtu != 4096) {
    return InvalidArgument("verbs: mtu " + std::to_string(c.mtu) +
                           " is not 256, 512, 1024, 2048 or 4096 (0: the port's active MTU)");
  }
  if (c.remote_qpn <= 1 || c.remote_qpn > 0xFFFFFF) {
    return InvalidArgument("verbs: remote_qpn " + std::to_string(c.remote_qpn) +
                           " must be a 24-bit QP number other than 0 (SMI) and 1 (GSI)");
  }
  if (c.qkey & 0x80000000u) {
    return InvalidArgument("verbs: qkey has its high bit set (controlled Q_Keys are privileged)");
  }
  if (c.send_depth < 1 || c.send_depth > 16384 || c.recv_depth < 1 || c.recv_depth > 16384) {
    return InvalidArgument("verbs: send_depth/recv_depth " + std::to_string(c.send_depth) + "/" +
                           std::to_string(c.recv_depth) + " not in [1, 16384]");
  }
  return Status::Ok();
}

}  // namespace ina::host
