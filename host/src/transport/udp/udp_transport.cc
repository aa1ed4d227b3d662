// The UDP transport: a connected ina::net UDP port (net/include/ina/net/udp.h) as a PortTransport.
#include "udp/udp_transport.h"

#include "faults.h"
#include "ina/net/udp.h"
#include "port_transport.h"

namespace ina::host::udp {

Result<std::unique_ptr<Transport>> OpenUdpTransport(const TransportConfig& config) {
  net::UdpPortConfig pc;
  pc.bind_ip = config.bind_host;
  pc.peer_ip = config.fabric_host;
  pc.peer_port = config.fabric_port;
  pc.socket_buffer_bytes = config.socket_buffer_bytes;
  pc.gso_gro = net::UdpGsoFromEnv();
  INA_ASSIGN_OR_RETURN(std::unique_ptr<net::Port> port, net::OpenUdpPort(pc));
  INA_ASSIGN_OR_RETURN(port, net::WrapWithFaults(std::move(port), ToFaultConfig(config.faults)));
  return std::unique_ptr<Transport>(new PortTransport(std::move(port), "udp"));
}

}  // namespace ina::host::udp
