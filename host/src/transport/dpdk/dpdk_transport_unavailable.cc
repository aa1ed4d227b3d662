// Linked instead of dpdk_transport.cc when CMake did not find libdpdk.
#include "dpdk/dpdk_transport.h"

namespace ina::host::dpdk {

const bool kBuilt = false;

Result<std::unique_ptr<Transport>> OpenDpdkTransport(const TransportConfig&) {
  return Unimplemented("transport: dpdk not built (libdpdk was not found by pkg-config)");
}

}  // namespace ina::host::dpdk
