// The DPDK transport: one ethdev port, one RX and one TX queue, Ethernet/IPv4/UDP built here.
//
// EAL: initialised once per process from DpdkConfig::eal_args (e.g. "--no-huge -m 256 --no-pci
// --file-prefix w0 --vdev net_memif0,socket=/run/ina/w0.sock"); a later transport in the same
// process reuses it and its arguments are ignored. One transport per port.
//
// TX: each packet is a header mbuf (Ethernet + IPv4 + UDP, 42 bytes, IPv4 checksum in software,
// UDP checksum 0 as IPv4 allows) chained to a second mbuf to which the caller's buffer is attached
// as an external buffer (rte_pktmbuf_attach_extbuf): the payload the communicator quantized into
// its slot buffer is read by the PMD where it lies, no copy in between. This needs a port that
// takes multi-segment mbufs (memif, af_packet) and IOVA-as-VA (true with --no-huge and for the
// virtual PMDs); otherwise (af_xdp, or zero_copy off) the payload is copied into one mbuf. The
// caller keeps a buffer unchanged until the switch answers the packet (the communicator does: a
// slot buffer is rewritten only after its result), which outlives any NIC DMA of it.
// Destination MAC: DpdkConfig::fabric_mac, else learnt from the first packet from the fabric's
// IPv4:port, else broadcast. No ARP.
// RX: frames that are not IPv4/UDP from fabric_host:fabric_port to local_ip:local_port are
// dropped. The payload is copied into the caller's RxPacket (len 0 when it does not fit).
// An idle RecvBurst polls with rte_pause, then sleeps 1, 2, 4 ... up to backoff_max_us between
// polls until its timeout, so a waiting worker does not hold a core of a small machine.
// Threads: the thread that first sends or receives (the communicator's progress thread, not an
// EAL thread) is registered with rte_thread_register so it has an lcore id. net_af_xdp needs it:
// from an unregistered thread its TX stopped after 1 000-5 000 frames (docs/benchmarks-dpdk.md).
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
