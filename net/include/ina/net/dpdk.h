// The DPDK port: one ethdev (net_memif, net_af_packet, net_af_xdp, a physical NIC: the ethdev
// code is the same), one RX and one TX queue, Ethernet/IPv4/UDP framing by frame.h.
// Queues: an ethdev may carry `queues` RX/TX queue pairs, one Port per queue (DpdkPortConfig::
// queue), each Port used by one thread: the first Port opened configures and starts the ethdev
// with every queue, the others attach to it, the last one closed stops it. Nothing is shared
// between the Ports of one ethdev on the data path (each queue its own mbuf pools). Which queue a
// frame arrives on is the PMD's business: net_memif delivers on RX queue q what its peer sent on
// TX queue q (so two ends with the same queue count pair queue q with queue q), net_af_packet
// (qpairs=) and net_af_xdp (queue_count=) spread by the kernel's or the NIC's hash.
//
// EAL: StartEal initialises it once per process (a later call's arguments are ignored; EALREADY,
// a process whose EAL someone else started, is fine). Without hugepages: "--no-huge -m 256
// --no-pci --file-prefix UNIQUE" (not --in-memory, which --no-huge refuses; not --no-shconf, with
// which net_memif will not probe).
//
// RX: frames that are not IPv4/UDP to ip:udp_port (and, connected, from peer_ip:peer_port) are
// dropped and counted (rx_other); a wrong IPv4 header or UDP checksum is counted (rx_bad_csum)
// and dropped (UDP checksum 0 means none, as IPv4 allows; a NIC that verified it says so in the
// mbuf and the port trusts it). Packets point into the mbufs (kept until the next RxBurst) when a
// frame is one segment, else into a per-port copy. The sender's MAC is kept in Packet::from (see
// port.h), so a reply needs no ARP; connected without peer_mac, the peer's MAC is learnt from its
// first frame (broadcast until then).
// TX: a header mbuf per packet (IPv4 header checksum and UDP checksum in software: the virtual
// PMDs offload neither; UDP checksum 0 for packets marked kTxPayloadChecked, port.h) and the
// payload copied after it, or with zero_copy (when the port takes multi-segment mbufs and IOVA is
// VA; the caller then keeps a buffer unchanged until its peer has answered it, which outlives any
// NIC DMA of it) attached as an external buffer, no copy. A full ring returns a short count; WaitTx
// pauses (DPDK has no TX wake-up). Idle: WaitRx polls with a pause, then sleeps doubling up to
// backoff_max_us (backoff.h). Threads: the thread that first uses the port (not an EAL thread) is
// registered with rte_thread_register so it has an lcore id (net_af_xdp's TX stalls without one).
// Built only when pkg-config finds libdpdk; otherwise every call answers Unimplemented.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ina/net/port.h"

namespace ina::net {

// False when libdpdk was not found at build time.
extern const bool kDpdkBuilt;

// Starts the EAL with args (whitespace-separated, without argv[0]) unless it runs already.
// Unavailable when it will not start (not root, no memory, bad arguments).
Status StartEal(const std::string& args);
// Releases the EAL (files under /var/run/dpdk) after every port is closed; no-op if not started.
void StopEal();
// The names of every ethdev the EAL probed (after StartEal).
std::vector<std::string> DpdkPortNames();

struct DpdkPortConfig {
  std::string name;       // ethdev name ("net_memif0"); empty: the first port not in use (for
                          // queue > 0: the port in use with `queues` queues and this one free)
  std::string ip;         // this side's IPv4 address (required)
  uint16_t udp_port = 0;  // and UDP port (required, != 0)
  std::string mac;        // "aa:bb:cc:dd:ee:ff"; empty: the port's own
  std::string peer_ip;    // non-empty: connected to peer_ip:peer_port (TxPacket::to optional)
  uint16_t peer_port = 0;
  std::string peer_mac;    // the peer's MAC; empty: broadcast until learnt from its frames
  bool zero_copy = false;  // TX payload as external buffers (see above)
  // Whole IPv4 datagrams instead of UDP payloads (the RoCE port over DPDK, roce.h): RxBurst hands
  // out each accepted frame's IPv4 datagram, header first (`from` as usual); TxBurst takes whole
  // IPv4 datagrams of at most `mtu` bytes to an AF_INET destination, fills in the IPv4 header
  // checksum and sends the rest as given (no zero-copy).
  bool ipv4_datagrams = false;
  // The IP MTU of the port's frames: 1500, or more for jumbo frames (up to 9000: an 8 KiB ina
  // payload, K=2048, in one frame). Above 1500 the mbufs hold a whole frame (RX and copied TX)
  // and the ethdev is configured with the MTU where it reports one that large; the vdev must
  // carry such frames too: a PMD whose reported largest frame is shorter is FailedPrecondition,
  // except net_memif and net_af_packet, which report 1518 whatever they carry (af_packet: give it
  // framesz=10240,blocksz=20480, else it drops the longer frames). Give memif buffers that hold a
  // whole frame (devarg bsize=16384 on both ends): a frame chained over several of its default
  // 2 KiB buffers arrives damaged now and then in DPDK 22.11 (the CRC32C trailer catches it and
  // loss recovery resends, at a fraction of the rate).
  // max_datagram_bytes() is mtu - 28.
  unsigned mtu = 1500;
  int backoff_max_us = 1000;  // idle RX back-off ceiling
  // The ethdev's RX/TX queue pairs (1 .. 64; every Port of one ethdev names the same count, and
  // the same mtu) and the one this Port uses (< queues). ipv4_datagrams takes one queue. The
  // ethdev's settings (mac, zero-copy's multi-segment TX, pool sizes) are its first Port's.
  unsigned queues = 1;
  unsigned queue = 0;
  unsigned rx_mbufs = 4095;  // mbuf pool sizes (a power of two minus one suits the ring); with
                             // several queues each queue's RX pool gets its share
  unsigned tx_mbufs = 4095;
};

// Errors: InvalidArgument (bad address, MAC or port name, mtu outside 576 .. 9000, a bad queue),
// FailedPrecondition (no port, the port or queue is in use, another queue count or mtu than the
// ethdev's, fewer queues on the PMD, or its frames are shorter than mtu + 14),
// Internal (a port or pool call failed), Unavailable (EAL not started), Unimplemented (not built).
Result<std::unique_ptr<Port>> OpenDpdkPort(const DpdkPortConfig& config);

// net_memif unmaps its peer's shared memory on the EAL's interrupt thread when the peer goes
// (memif_disconnect: "not connected", then munmap), with nothing between that and a data thread
// already inside an RX or TX burst on the port, which read "connected" a moment before: that burst
// then faults (DPDK 22.11; every memif server whose client exits while it polls). A DpdkPort on
// net_memif brackets each burst with a MemifBurst, and QuiesceMemifBursts() returns once every
// other thread that was inside one when it was called has left it (a burst that starts later sees
// "not connected" and touches nothing). A process that polls memif ports calls it before each
// munmap: it links ina::net_memif_unmap_guard, whose munmap does (ina-switchd, ina-rtlsim).
// libina does not (a library must not replace its program's munmap): a worker on a memif port
// whose switch goes away while the worker polls can still fault so; link the guard into such a
// program to prevent it.
class MemifBurst {
 public:
  MemifBurst();  // enters (this thread's sequence becomes odd)
  ~MemifBurst();
  MemifBurst(const MemifBurst&) = delete;
  MemifBurst& operator=(const MemifBurst&) = delete;
};
void QuiesceMemifBursts();

}  // namespace ina::net
