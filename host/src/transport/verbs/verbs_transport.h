// The verbs transport: ina messages as RoCEv2 UD SENDs over libibverbs (docs/rdma.md).
//
// One UD QP on VerbsConfig::device/port, its source GID by gid_index (default: the port's first
// RoCE v2 IPv4 GID), an address handle to the fabric's GID (::ffff:fabric_host) and remote_qpn.
// Every message is one SEND_ONLY (the whole ina message in the payload, <= the path MTU), so the
// fabric sees BTH + DETH + message + ICRC after UDP port 4791; UD does not retransmit, ina's own
// loss recovery runs as over UDP.
//
// Memory: the verbs calls that touch memory are wrapped once (MemoryRegion: ibv_reg_mr, and
// ibv_reg_dmabuf_mr for device memory: GPUDirect RDMA, RegisterTxBody). TX: a packet whose bytes
// lie in a region registered with RegisterTxMemory is posted from where it lies (zero copy; the
// caller keeps it unchanged until the fabric answers it, as the communicator does for its slot
// buffers); any other packet is copied into a registered bounce slot. RX: receive buffers are a
// registered pool (each with the 40-byte GRH room UD needs); RecvBurst copies the message into the
// caller's RxMessage and reposts the buffer. Completions are polled in SendBurst (reclaiming slots)
// and RecvBurst (which blocks on a completion channel when asked to wait). A packet with a body
// (TxMessage::body, GPUDirect RDMA) is posted as a gather list: header and trailer from the
// caller's registered memory (or a bounce slot), the payload from a region registered with
// RegisterTxBody (device memory through a dma-buf). UnregisterTxBody waits for every posted send to
// complete first. Received messages whose source QP or GID is not the fabric's are dropped
// (counted). Errors: every failing verbs call becomes a Status that names the call and the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ina/host/transport.h"

namespace ina::host::verbs {

// False when libibverbs was not found at build time (then Open answers Unimplemented).
extern const bool kBuilt;

struct VerbsCounters {
  uint64_t tx_zero_copy = 0;  // packets posted from registered caller memory
  uint64_t tx_bounced = 0;    // packets copied into a bounce slot
  uint64_t tx_gather = 0;     // of those sent, packets whose payload came from a body region
                              // (TxMessage::body; GPUDirect RDMA: a gather list of 2-3 SGEs)
  uint64_t rx_delivered = 0;
  uint64_t rx_foreign = 0;  // dropped: not from the fabric's QP/GID
  uint64_t rx_too_big = 0;  // dropped: larger than the caller's buffer
  uint64_t wc_errors = 0;   // completions with an error status (the last one is returned)
};

class VerbsTransport : public Transport {
 public:
  // Registers [data, data + len) for zero-copy sends (ibv_reg_mr, local read). The region must
  // outlive the transport or be released first with UnregisterTxMemory. This is the hook a
  // communicator needs to quantize straight into NIC-readable memory (docs/rdma.md).
  Status RegisterTxMemory(const void* data, size_t len) override = 0;
  virtual Status UnregisterTxMemory(const void* data) = 0;
  // Transport::RegisterTxBody: dmabuf_fd >= 0 registers through ibv_reg_dmabuf_mr (iova = data,
  // the device's virtual address; Unimplemented when the rdma-core at build time lacks it, the
  // provider's error otherwise: rxe has no dma-buf), -1 through ibv_reg_mr. Each TxMessage with a
  // body is one SEND of a gather list: the host header, the body, the host trailer.
  virtual uint32_t qp_num() const = 0;  // this worker's QP number (the fabric replies to it)
  virtual int active_mtu() const = 0;   // the path MTU in bytes
  size_t max_message_bytes() const override { return static_cast<size_t>(active_mtu()); }
  virtual VerbsCounters counters() const = 0;
};

// Errors: InvalidArgument (config out of range, fabric_host not IPv4), NotFound (no such device,
// or no RoCE v2 IPv4 GID on the port), FailedPrecondition (port not active, MTU above the
// port's), Unavailable/Internal (a verbs call failed; the message names it), Unimplemented (not
// built).
Result<std::unique_ptr<VerbsTransport>> OpenVerbsTransport(const TransportConfig& config);

}  // namespace ina::host::verbs
