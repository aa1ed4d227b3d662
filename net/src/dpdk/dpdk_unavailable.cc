// Linked instead of dpdk_port.cc when CMake did not find libdpdk.
#include "ina/net/dpdk.h"

namespace ina::net {

const bool kDpdkBuilt = false;

Status StartEal(const std::string&) {
  return Unimplemented("dpdk: not built (libdpdk was not found by pkg-config)");
}
void StopEal() {}
std::vector<std::string> DpdkPortNames() { return {}; }
Result<std::unique_ptr<Port>> OpenDpdkPort(const DpdkPortConfig&) {
  return Unimplemented("dpdk: not built (libdpdk was not found by pkg-config)");
}

}  // namespace ina::net
