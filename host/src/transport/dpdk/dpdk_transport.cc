// The DPDK transport: a connected ina::net DPDK port as a PortTransport (see dpdk_transport.h).
#include "dpdk/dpdk_transport.h"

#include "faults.h"
#include "ina/net/dpdk.h"
#include "port_transport.h"

namespace ina::host::dpdk {

const bool kBuilt = net::kDpdkBuilt;

Result<std::unique_ptr<Transport>> OpenDpdkTransport(const TransportConfig& tc) {
  const DpdkConfig& c = tc.dpdk;
  if (c.local_ip.empty() || c.local_port == 0) {
    return InvalidArgument("dpdk: local_ip and local_port (INA_DPDK_LOCAL=ip:port) are required");
  }
  if (c.backoff_max_us < 0) return InvalidArgument("dpdk: backoff_max_us < 0");
  net::DpdkPortConfig pc;
  pc.name = c.port;
  pc.ip = c.local_ip;
  pc.udp_port = c.local_port;
  pc.mac = c.local_mac;
  pc.peer_ip = tc.fabric_host;
  pc.peer_port = tc.fabric_port;
  pc.peer_mac = c.fabric_mac;
  pc.zero_copy = c.zero_copy;
  pc.backoff_max_us = c.backoff_max_us;
  pc.mtu = c.mtu;
  pc.queues = tc.dpdk_queues;
  pc.queue = tc.dpdk_queue;
  if (!net::kDpdkBuilt) return net::OpenDpdkPort(pc).status();
  INA_RETURN_IF_ERROR(net::StartEal(c.eal_args));
  INA_ASSIGN_OR_RETURN(std::unique_ptr<net::Port> port, net::OpenDpdkPort(pc));
  INA_ASSIGN_OR_RETURN(port, net::WrapWithFaults(std::move(port), ToFaultConfig(tc.faults)));
  return std::unique_ptr<Transport>(new PortTransport(std::move(port), "dpdk"));
}

}  // namespace ina::host::dpdk
