// MakeTransport: picks a backend by name (no #ifdef; backends that are not built are not listed).
#include <string>

#include "ina/host/transport.h"
#include "udp/udp_transport.h"

namespace ina::host {

Result<std::unique_ptr<Transport>> MakeTransport(const TransportConfig& config) {
  if (config.kind == "udp") return udp::OpenUdpTransport(config);
  return InvalidArgument("transport: unknown kind '" + config.kind + "' (available: udp)");
}

}  // namespace ina::host
