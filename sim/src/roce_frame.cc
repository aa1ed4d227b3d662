#include "ina/sim/roce_frame.h"

#include <arpa/inet.h>

#include <cstring>

namespace ina::sim {

namespace r = ::ina::proto::roce;

std::vector<uint8_t> MakeRoceFrame(std::span<const uint8_t> message, const RoceFrameFields& f) {
  const size_t pad = (4 - message.size() % 4) % 4;
  const size_t udp_payload = r::kUdOverheadBytes + message.size() + pad;
  std::vector<uint8_t> frame(kEthBytes + r::kIpv4Bytes + r::kUdpBytes + udp_payload, 0);
  for (size_t i = 0; i < 12; ++i) frame[i] = static_cast<uint8_t>(0x02 + i);  // MACs
  frame[12] = 0x08;                                                           // IPv4
  uint8_t* ip = frame.data() + kEthBytes;
  r::BuildIpv4Udp(htonl(f.src_ip), htonl(f.dst_ip), f.src_port, r::kUdpPort, f.ip_id, udp_payload,
                  ip);
  r::UdSend s;
  s.opcode = f.opcode;
  s.pkey = f.pkey;
  s.dest_qp = f.dest_qp;
  s.psn = f.psn;
  s.qkey = f.qkey;
  s.src_qp = f.src_qp;
  s.message = message;
  r::BuildUdSend(s, std::span<uint8_t>(ip + r::kIpv4Bytes + r::kUdpBytes, udp_payload));
  ResealRoceFrame(frame);
  return frame;
}

void ResealRoceFrame(std::span<uint8_t> frame) {
  uint8_t* ip = frame.data() + kEthBytes;
  const size_t tot = proto::Load16(ip + 2);
  r::StoreIcrc(ip + tot - r::kIcrcBytes, r::ComputeIcrc(std::span<const uint8_t>(ip, tot)));
}

}  // namespace ina::sim
