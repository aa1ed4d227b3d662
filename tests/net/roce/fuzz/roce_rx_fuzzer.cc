// libFuzzer target (clang): any datagram into RoceRx, the RoCE port's receive checks. Invariants
// beyond "no crash, no out-of-bounds read" (run it under ASan): an accepted packet has a good
// ICRC over the length its IP header states, and the message handed out lies inside it.
// The seeded damage test in roce_port_test.cc replays the same checks as an ordinary test.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "ina/net/roce.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace r = ::ina::proto::roce;
  static ina::net::RocePsnTable table(64);  // PSN state carries over between inputs, as live
  ina::net::RoceIdentity me;
  me.ip_be = 0x0201000A;  // 10.0.1.2
  const std::span<const uint8_t> dg(data, size);
  std::span<const uint8_t> m;
  uint32_t ip = 0, qpn = 0, gap = 0;
  if (ina::net::RoceRx(dg, me, &table, &m, &ip, &qpn, &gap) != ina::net::RoceDrop::kOk) return 0;
  const size_t tot = (size_t{data[2]} << 8) | data[3];
  if (tot > size || !r::IcrcOk(dg.first(tot))) std::abort();
  if (m.data() < data || m.data() + m.size() > data + tot - r::kIcrcBytes) std::abort();
  return 0;
}
