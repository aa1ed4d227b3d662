// The UDP transport: a connected ina::net UDP port (net/include/ina/net/udp.h) to the fabric.
//
// connect() makes the kernel drop datagrams from any other source and turns ICMP port-unreachable
// into Unavailable on a later call (the caller may retry: the fabric may not be up yet). Bursts
// go through sendmmsg/recvmmsg; RecvBurst waits with ppoll (microsecond timeout). A received
// datagram larger than its RxMessage buffer is reported with len 0.
//
// GSO/GRO (Linux; TransportConfig::udp_gso = false turns both off, a kernel without them falls
// back silently):
// SendBurst sends each run of consecutive equal-length packets as one UDP_SEGMENT message,
// gathering the caller's buffers without a copy; the wire still carries one datagram per packet
// and the count returned is exact. Received GRO trains are split into consecutive RxPackets
// pointing into the port's buffer (no copy, PortTransport); segments the caller had no room for
// come first on the next RecvBurst.
#pragma once

#include <memory>

#include "ina/host/transport.h"

namespace ina::host::udp {

// Errors: InvalidArgument (bad host), the OS error of socket/bind/connect otherwise.
Result<std::unique_ptr<Transport>> OpenUdpTransport(const TransportConfig& config);

}  // namespace ina::host::udp
