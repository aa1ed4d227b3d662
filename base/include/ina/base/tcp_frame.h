// The one length-prefixed framing of ina's TCP side channels: the NCCL plugin's point-to-point
// messages (plugins/nccl/src/tcp_net.h) and ina-bench's coordination protocol
// (tools/ina_bench/coord_wire.h). Not the ina protocol itself (proto/: UDP datagrams with their
// own header).
//
// A frame is a 12-byte head, the body's length in bytes (u64, big-endian) and a tag (u32,
// big-endian: the message type, or NCCL's tag), then the body. Each user bounds the body it
// accepts (a head is read before its body is, so a damaged or hostile length must not become an
// allocation). Header-only; no I/O (each user moves the bytes its own way: non-blocking for NCCL,
// blocking with a deadline for ina-bench). Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ina {

inline constexpr size_t kTcpFrameHeadBytes = 12;

struct TcpFrameHead {
  uint64_t body = 0;  // bytes after the head
  uint32_t tag = 0;
};

// Writes `h` into out[0 .. kTcpFrameHeadBytes).
inline void EncodeTcpFrameHead(const TcpFrameHead& h, uint8_t* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(h.body >> (56 - 8 * i));
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<uint8_t>(h.tag >> (24 - 8 * i));
}

// Reads a head from in[0 .. kTcpFrameHeadBytes).
inline TcpFrameHead DecodeTcpFrameHead(const uint8_t* in) {
  TcpFrameHead h;
  for (int i = 0; i < 8; ++i) h.body = (h.body << 8) | in[i];
  for (int i = 8; i < 12; ++i) h.tag = (h.tag << 8) | in[i];
  return h;
}

}  // namespace ina
