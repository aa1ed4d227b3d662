// RoCEv2 frames for the RTL core's s_axis: an ina message as one UD SEND_ONLY (docs/rdma.md),
// built with the software codec (ina/proto/roce.h), behind a 14-byte Ethernet header. What the
// RTL's RoCEv2 ingress (rtl/core/ina_roce_rx.sv) takes and what the simulation harnesses send.
//
// Threading: pure functions. Errors: none (the caller's fields are taken as they are, masked to
// their widths).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ina/proto/roce.h"
#include "ina/proto/wire.h"

namespace ina::sim {

inline constexpr size_t kEthBytes = 14;

// The fields of one frame. Defaults: what the RTL's registers accept after reset (roce_qpn,
// roce_qkey, roce_pkey), from 10.0.0.1 to 10.0.0.2.
struct RoceFrameFields {
  uint32_t src_ip = 0x0A000001;  // host order
  uint32_t dst_ip = 0x0A000002;
  uint16_t src_port = 49152;
  uint16_t ip_id = 0;
  uint8_t opcode = proto::roce::kOpUdSendOnly;
  uint16_t pkey = static_cast<uint16_t>(proto::reg::kRocePkeyReset);
  uint32_t dest_qp = proto::reg::kRoceQpnReset;
  uint32_t psn = 0;
  uint32_t qkey = proto::reg::kRoceQkeyReset;
  uint32_t src_qp = 0x11;
};

// Ethernet (EtherType IPv4) | IPv4 (no options, DF, TTL 64, checksum 0: the ICRC masks it) | UDP
// (destination port 4791) | BTH | DETH | message | pad to 4 bytes | ICRC.
std::vector<uint8_t> MakeRoceFrame(std::span<const uint8_t> message, const RoceFrameFields& f);

// Recomputes the ICRC of a frame MakeRoceFrame built whose fields were changed afterwards (its
// IPv4 total length says where the ICRC is). REQUIRES: the frame holds that many bytes.
void ResealRoceFrame(std::span<uint8_t> frame);

}  // namespace ina::sim
