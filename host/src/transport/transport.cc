// MakeTransport: picks a backend by name (no #ifdef: a backend that is not built answers
// Unimplemented from net/, see dpdk/dpdk_transport.h).
#include "ina/host/transport.h"

#include <cstdlib>
#include <string>

#include "dpdk/dpdk_transport.h"
#include "ina/base/parse.h"
#include "udp/udp_transport.h"
#include "verbs/verbs_transport.h"

namespace ina::host {
Status ApplyDpdkEnv(DpdkConfig* c) {
  if (const char* v = std::getenv("INA_DPDK_EAL")) c->eal_args = v;
  if (const char* v = std::getenv("INA_DPDK_PORT")) c->port = v;
  if (const char* v = std::getenv("INA_DPDK_LOCAL")) {
    const std::string s(v);
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return InvalidArgument("INA_DPDK_LOCAL='" + s + "': expected ip:port");
    }
    INA_ASSIGN_OR_RETURN(long long port,
                         ParseInt("INA_DPDK_LOCAL port", s.substr(colon + 1), 1, 65535));
    c->local_ip = s.substr(0, colon);
    c->local_port = static_cast<uint16_t>(port);
  }
  if (const char* v = std::getenv("INA_DPDK_MAC")) c->local_mac = v;
  if (const char* v = std::getenv("INA_DPDK_FABRIC_MAC")) c->fabric_mac = v;
  if (const char* v = std::getenv("INA_DPDK_BACKOFF_US")) {
    INA_ASSIGN_OR_RETURN(long long us, ParseInt("INA_DPDK_BACKOFF_US", v, 0, 1000000));
    c->backoff_max_us = static_cast<int>(us);
  }
  if (const char* v = std::getenv("INA_DPDK_MTU")) {
    INA_ASSIGN_OR_RETURN(long long mtu, ParseInt("INA_DPDK_MTU", v, 576, 9000));
    c->mtu = static_cast<unsigned>(mtu);
  }
  if (const char* v = std::getenv("INA_DPDK_ZERO_COPY")) {
    INA_ASSIGN_OR_RETURN(long long z, ParseInt("INA_DPDK_ZERO_COPY", v, 0, 1));
    c->zero_copy = z != 0;
  }
  return Status::Ok();
}

Result<std::unique_ptr<Transport>> MakeTransport(const TransportConfig& config) {
  if (config.kind == "udp") return udp::OpenUdpTransport(config);
  if (config.kind == "dpdk") {
    TransportConfig c = config;
    if (c.dpdk.eal_args.empty()) INA_RETURN_IF_ERROR(ApplyDpdkEnv(&c.dpdk));
    return dpdk::OpenDpdkTransport(c);
  }
  if (config.kind == "verbs") {
    const TransportFaults& f = config.faults;
    if (f.drop != 0 || f.dup != 0 || f.reorder != 0 || f.corrupt != 0) {
      return Unimplemented("transport verbs: fault injection is not available (udp and dpdk only)");
    }
    // The INA_VERBS_* variables are the config's business (CommConfig::FromEnv, ina_config_init):
    // applied here too, they would override what a caller set on purpose.
    INA_ASSIGN_OR_RETURN(std::unique_ptr<verbs::VerbsTransport> t,
                         verbs::OpenVerbsTransport(config));
    return std::unique_ptr<Transport>(std::move(t));
  }
  return InvalidArgument("transport: unknown kind '" + config.kind + "' (available: udp" +
                         (dpdk::kBuilt ? ", dpdk" : "; dpdk not built") +
                         (verbs::kBuilt ? ", verbs)" : "; verbs not built)"));
}

}  // namespace ina::host
