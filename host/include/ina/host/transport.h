// The packet transport under the communicator: bursts of datagrams to and from the fabric.
//
// Implementations live in host/src/transport/<name>/ (udp, dpdk, verbs) and are made by
// MakeTransport(config). udp and dpdk are one connected ina::net port as a PortTransport (net/:
// the burst port interface, the frame codec, EAL start-up, idle back-off and fault injection
// shared with ina-switchd); verbs is one UD QP of libibverbs (docs/rdma.md). A packet is one ina
// message (header + payload), what the fabric sees as the UDP payload. The DPDK transport attaches
// the caller's buffers to mbufs as external buffers where the port allows it, so callers keep a TX
// buffer unchanged until the fabric answered it.
//
// Vocabulary: the worker side speaks of messages (TxMessage, RxMessage: one ina message each,
// possibly in two memories) through a Transport's SendBurst/RecvBurst; the packet I/O layer under
// both sides speaks of datagrams of a port (net::Packet, net::TxPacket through net::Port's
// RxBurst/TxBurst, ina/net/port.h).
//
// Threading: a Transport is used by one thread at a time (the communicator's progress thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ina/base/status.h"

namespace ina::host {

struct TxMessage {
  const uint8_t* data = nullptr;
  size_t len = 0;  // bytes
  bool payload_checked =
      false;  // a data packet: its CRC32C trailer covers it (net::kTxPayloadChecked)
  // A packet in two memories (GPUDirect RDMA, docs/gpu.md): with `body`, the message is
  // data[0, split) + body[0, body_len) + data[split, len), and body lies in a region registered
  // with RegisterTxBody (device memory the host never reads). Only to a transport whose
  // sends_body() is true.
  const uint8_t* body = nullptr;
  size_t body_len = 0;
  size_t split = 0;
  size_t bytes() const { return len + body_len; }  // the whole message
};

// One received packet. The caller sets data/cap (its buffer); RecvBurst sets len and may point
// data at memory of the transport's own (an mbuf, a GRO buffer) instead of copying, valid until
// the next RecvBurst: read data after the call and set it again before the next one. A packet
// longer than cap comes with len 0.
struct RxMessage {
  uint8_t* data = nullptr;  // caller's buffer, or the transport's (see above)
  size_t cap = 0;           // the caller's buffer size in bytes
  size_t len = 0;           // set by RecvBurst
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Sends packets in order; returns how many were sent (fewer when the kernel/NIC queue is full;
  // the caller retries the rest later). Errors: Unavailable and friends from the OS.
  virtual Result<size_t> SendBurst(std::span<const TxMessage> packets) = 0;
  // Receives up to packets.size() packets, waiting at most `timeout` for the first (zero: poll).
  // Returns how many were received (0 on timeout). Packets not from the fabric are discarded.
  virtual Result<size_t> RecvBurst(std::span<RxMessage> packets,
                                   std::chrono::microseconds timeout) = 0;
  virtual std::string_view name() const = 0;
  // The longest message (bytes: header, payload, trailer) one packet carries to the fabric
  // without fragmentation: udp: the route's MTU less IPv4/IPv6 + UDP headers (1472 on a 1500-byte
  // Ethernet, 8972 on a 9000-byte jumbo one); dpdk: the port's frames; verbs: the path MTU (a UD
  // SEND is one packet). The communicator sizes K by it (CommConfig::k 0). Default: 65507.
  virtual size_t max_message_bytes() const { return 65507; }
  // The kernel's receive queue for this transport's socket (udp; net::Port::rx_queue_datagrams):
  // about how many messages of `message_bytes` it holds before the kernel drops what arrives, and
  // the buffer it has (the kernel's accounting, twice what was set). 0: no kernel socket queue
  // (dpdk, verbs: their own rings) or not known. The communicator caps the window it asks by the
  // first (docs/host.md, "Socket buffers").
  virtual size_t rx_queue_messages(size_t message_bytes) const {
    (void)message_bytes;
    return 0;
  }
  virtual size_t rx_buffer_bytes() const { return 0; }
  // The kernel's drops at that socket since it opened (its buffer full; a message, or a GSO
  // train of them that arrived whole: net::Port::rx_kernel_drops), read now: callable from any
  // thread. 0: none, or no kernel socket.
  virtual uint64_t rx_kernel_drops() const { return 0; }
  // Registers [data, data + len) as memory packets will be sent from, so a transport that can
  // send from registered memory (verbs: ibv_reg_mr) posts them from where they lie instead of
  // copying; the caller keeps the region alive (and a packet's bytes unchanged until the fabric
  // answered it) for the transport's life. Called once per region, before the first send (the
  // communicator: its slot window's TX buffers, which it quantizes into). Default: nothing to do
  // (udp copies into the kernel, dpdk attaches buffers per packet). Errors: the transport's
  // (verbs: the ibv_reg_mr failure, naming the device).
  virtual Status RegisterTxMemory(const void* data, size_t len) {
    (void)data, (void)len;
    return Status::Ok();
  }

  // Sending payloads from device memory (TxMessage::body; GPUDirect RDMA, docs/gpu.md).
  // sends_body(): this transport posts a packet from two memories (verbs: a gather list of host
  // header, device payload, host trailer). RegisterTxBody registers [data, data + len) for
  // bodies: a dma-buf (dmabuf_fd >= 0, from dmabuf_offset; verbs: ibv_reg_dmabuf_mr) or host
  // memory (dmabuf_fd -1: ibv_reg_mr). UnregisterTxBody waits (bounded) until no posted send
  // reads the region, then releases it. Defaults: false and Unimplemented.
  virtual bool sends_body() const { return false; }
  virtual Status RegisterTxBody(const void* data, size_t len, int dmabuf_fd,
                                uint64_t dmabuf_offset) {
    (void)data, (void)len, (void)dmabuf_fd, (void)dmabuf_offset;
    return Unimplemented(std::string(name()) + ": sends packets from host memory only");
  }
  virtual Status UnregisterTxBody(const void* data) {
    (void)data;
    return Unimplemented(std::string(name()) + ": sends packets from host memory only");
  }
};

// The DPDK transport's settings (kind "dpdk"; see host/src/transport/dpdk/dpdk_transport.h).
// Environment (ApplyDpdkEnv): INA_DPDK_EAL, INA_DPDK_PORT, INA_DPDK_LOCAL=ip:port, INA_DPDK_MAC,
// INA_DPDK_FABRIC_MAC, INA_DPDK_BACKOFF_US, INA_DPDK_ZERO_COPY=0|1, INA_DPDK_MTU.
struct DpdkConfig {
  std::string eal_args;       // EAL command line, whitespace-separated, without argv[0]
  std::string port;           // ethdev name ("net_memif0"); empty: the first port
  std::string local_ip;       // this worker's IPv4 address on the fabric (required)
  uint16_t local_port = 0;    // this worker's UDP port (required, != 0)
  std::string local_mac;      // "aa:bb:cc:dd:ee:ff"; empty: the port's own
  std::string fabric_mac;     // the switch's MAC; empty: broadcast until learnt from its packets
  int backoff_max_us = 1000;  // idle RX back-off ceiling (pause, then sleeps doubling up to it)
  bool zero_copy = true;      // attach TX buffers as external mbufs when the port allows
  unsigned mtu = 1500;        // the frames' IP MTU, 576 .. 9000 (9000: jumbo frames, K=2048)
};

// Applies the INA_DPDK_* variables that are set. InvalidArgument names a malformed variable.
Status ApplyDpdkEnv(DpdkConfig* config);

// The verbs (RDMA) transport's settings (kind "verbs"; see host/src/transport/verbs/).
// One UD QP; each ina message is one RoCEv2 UD SEND to the fabric's QP (docs/rdma.md).
// Environment (ApplyVerbsEnv): INA_VERBS_DEVICE, INA_VERBS_PORT, INA_VERBS_GID, INA_VERBS_MTU,
// INA_VERBS_QPN, INA_VERBS_QKEY.
struct VerbsConfig {
  std::string device;              // RDMA device name ("rxe0", "mlx5_0"); empty: the first one
  int port = 1;                    // device port, 1..255
  int gid_index = -1;              // source GID index; -1: the port's first RoCE v2 IPv4 GID
  int mtu = 0;                     // path MTU 256/512/1024/2048/4096; 0: the port's active MTU
  uint32_t remote_qpn = 0x000100;  // the fabric's QP number (24 bits, != 0 and != 1)
  uint32_t qkey = 0x494E4100;      // Q_Key of both sides ("INA\0"), not the GSI key
  int send_depth = 256;            // send queue and TX bounce slots, 1..16384
  int recv_depth = 512;            // posted receive buffers, 1..16384
};

// Applies the INA_VERBS_* variables that are set. InvalidArgument names a malformed variable.
Status ApplyVerbsEnv(VerbsConfig* config);
// InvalidArgument naming the field when a value is out of range.
Status ValidateVerbsConfig(const VerbsConfig& config);

// Fault injection at this end of the transport (ina::net's FaultPort, net/include/ina/net/fault.h:
// seeded drop / duplicate / reorder / corrupt per packet, both directions). None by default; for
// tests of the layers above under loss.
struct TransportFaults {
  double drop = 0;  // probabilities in [0, 1]
  double dup = 0;
  double reorder = 0;
  double corrupt = 0;
  uint64_t seed = 1;
};

struct TransportConfig {
  std::string kind = "udp";  // udp, dpdk or verbs (the last two when built)
  std::string fabric_host = "127.0.0.1";
  uint16_t fabric_port = 47000;
  std::string bind_host = "0.0.0.0";  // local address; port is ephemeral
  int socket_buffer_bytes = 8 << 20;  // SO_RCVBUF / SO_SNDBUF request
  bool udp_gso = true;  // kind "udp": UDP GSO trains out, GRO in (CommConfig::udp_gso)
  // kind "dpdk" only. When eal_args is empty, MakeTransport fills it from INA_DPDK_* first.
  DpdkConfig dpdk;
  // kind "dpdk" only: the port's queue pairs and the one this transport uses (net/dpdk.h). The
  // communicator sets them for lanes on switch cores: lane l on queue l of one port.
  unsigned dpdk_queues = 1;
  unsigned dpdk_queue = 0;
  // kind "verbs" only: fabric_host is the fabric's IPv4 address (its GID ::ffff:a.b.c.d);
  // fabric_port is not used (RoCEv2 is UDP port 4791). MakeTransport applies INA_VERBS_* first.
  VerbsConfig verbs;
  TransportFaults faults;  // any kind; InvalidArgument for a rate outside [0, 1]
};

// InvalidArgument for an unknown kind or a bad address; Unimplemented for a backend that this
// build lacks (dpdk without libdpdk); the OS / driver error otherwise.
Result<std::unique_ptr<Transport>> MakeTransport(const TransportConfig& config);

}  // namespace ina::host
