// The DPDK transport: a connected ina::net DPDK port (net/include/ina/net/dpdk.h) to the fabric;
// one ethdev port, one RX and one TX queue, Ethernet/IPv4/UDP framing and checksums by net/.
//
// EAL: started once per process from DpdkConfig::eal_args (e.g. "--no-huge -m 256 --no-pci
// --file-prefix w0 --vdev net_memif0,socket=/run/ina/w0.sock"); a later transport in the same
// process reuses it and its arguments are ignored. One transport per port.
// TX: with zero_copy (the default) the caller's buffer is attached to an mbuf as an external
// buffer where the port allows it (multi-segment TX, IOVA as VA: memif, af_packet), so the caller
// keeps a TX buffer unchanged until the switch answers the packet (the communicator does: a slot
// buffer is rewritten only after its result); otherwise it is copied. Destination MAC:
// DpdkConfig::fabric_mac, else learnt from the first packet from the fabric, else broadcast.
// RX: only IPv4/UDP from fabric_host:fabric_port to local_ip:local_port with good checksums; the
// RxMessage points at the payload in its mbuf (no copy, PortTransport; len 0 when it is longer
// than the caller's cap). An idle RecvBurst polls, then yields and sleeps (net/backoff.h, sleeps
// doubling up to backoff_max_us) until its timeout.
#pragma once

#include <memory>

#include "ina/host/transport.h"

namespace ina::host::dpdk {

// False when libdpdk was not found at build time (then Open answers Unimplemented).
extern const bool kBuilt;

// Errors: InvalidArgument (bad address, MAC, port name), Unavailable (EAL would not start: not
// root, no memory...), Internal (a port or pool call failed), Unimplemented (not built).
Result<std::unique_ptr<Transport>> OpenDpdkTransport(const TransportConfig& config);

}  // namespace ina::host::dpdk
