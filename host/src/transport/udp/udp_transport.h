// The UDP transport: one connected, non-blocking UDP socket to the fabric.
//
// connect() makes the kernel drop datagrams from any other source and turns ICMP port-unreachable
// into ECONNREFUSED on a later call, which this transport reports as Unavailable (the caller may
// retry: the fabric may not be up yet). Bursts go through sendmmsg/recvmmsg; RecvBurst waits with
// ppoll (microsecond timeout). Socket buffers are sized with SO_RCVBUFFORCE/SO_SNDBUFFORCE when
// allowed (root), else SO_RCVBUF/SO_SNDBUF (capped by net.core.*mem_max). A received datagram
// larger than its RxPacket buffer is reported with len 0.
//
// GSO/GRO (Linux; INA_UDP_GSO=0 turns both off, a kernel without them falls back silently):
// SendBurst sends each run of consecutive equal-length packets (a shorter one may end the run;
// at most 64 packets and 65507 bytes) as one sendmsg with UDP_SEGMENT, gathering the caller's
// buffers without a copy; the wire still carries one datagram per packet, and the count returned
// is exact (a train goes whole or not at all). The socket takes UDP_GRO: a received train is
// split into consecutive RxPackets (copied from a per-transport buffer); segments the caller had
// no room for are kept and handed out first on the next RecvBurst.
#pragma once

#include <memory>

#include "ina/host/transport.h"

namespace ina::host::udp {

// Errors: InvalidArgument (bad host), the OS error of socket/bind/connect otherwise.
Result<std::unique_ptr<Transport>> OpenUdpTransport(const TransportConfig& config);

}  // namespace ina::host::udp
