// The UDP transport: one connected, non-blocking UDP socket to the fabric.
//
// connect() makes the kernel drop datagrams from any other source and turns ICMP port-unreachable
// into ECONNREFUSED on a later call, which this transport reports as Unavailable (the caller may
// retry: the fabric may not be up yet). Bursts go through sendmmsg/recvmmsg; RecvBurst waits with
// ppoll (microsecond timeout). Socket buffers are sized with SO_RCVBUFFORCE/SO_SNDBUFFORCE when
// allowed (root), else SO_RCVBUF/SO_SNDBUF (capped by net.core.*mem_max). A received datagram
// larger than its RxPacket buffer is reported with len 0.
#pragma once

#include <memory>

#include "ina/host/transport.h"

namespace ina::host::udp {

// Errors: InvalidArgument (bad host), the OS error of socket/bind/connect otherwise.
Result<std::unique_ptr<Transport>> OpenUdpTransport(const TransportConfig& config);

}  // namespace ina::host::udp
