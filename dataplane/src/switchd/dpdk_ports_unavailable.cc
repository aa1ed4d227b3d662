// Linked instead of dpdk_ports.cc when CMake did not find libdpdk.
#include "ina/dp/switchd/dpdk_ports.h"

namespace ina::dp::switchd {

const bool kDpdkBuilt = false;

Result<std::unique_ptr<DpdkPorts>> DpdkPorts::Open(const DpdkPortsConfig&) {
  return Unimplemented("--io dpdk: ina-switchd was built without libdpdk (pkg-config libdpdk)");
}

}  // namespace ina::dp::switchd
