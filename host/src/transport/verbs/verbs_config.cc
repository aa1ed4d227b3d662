// VerbsConfig validation and INA_VERBS_* parsing: built with or without libibverbs.
#include <cstdlib>
#include <string>

#include "ina/base/parse.h"
#include "ina/host/transport.h"

namespace ina::host {

Status ApplyVerbsEnv(VerbsConfig* c) {
  if (const char* v = std::getenv("INA_VERBS_DEVICE")) c->device = v;
  INA_RETURN_IF_ERROR(EnvInt("INA_VERBS_PORT", 1, 255, &c->port));
  INA_RETURN_IF_ERROR(EnvInt("INA_VERBS_GID", -1, 255, &c->gid_index));
  INA_RETURN_IF_ERROR(EnvInt("INA_VERBS_MTU", 0, 4096, &c->mtu));
  INA_RETURN_IF_ERROR(EnvInt("INA_VERBS_QPN", 0, 0xFFFFFF, &c->remote_qpn));
  INA_RETURN_IF_ERROR(EnvInt("INA_VERBS_QKEY", 0, 0xFFFFFFFFLL, &c->qkey));
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
