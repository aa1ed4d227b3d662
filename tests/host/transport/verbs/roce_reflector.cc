// roce_reflector: a UDP-socket "switch" for the verbs transport's guest tests (tests/vm/guest).
// It receives the RoCEv2 packets rxe sends to IP:4791 (full datagrams through a raw socket, so the
// IP header the ICRC covers is known), checks ICRC, BTH/DETH and the ina header/payload with the
// codec (ina/proto/roce.h, wire.h), and answers each with the same ina message whose int32
// elements are incremented by 1, as a UD SEND from its QPN to the sender's QP, with the ICRC
// recomputed for the datagram the kernel will emit (IP ID 0: unconnected socket, DF).
//
//   roce_reflector IP QPN QKEY MODE COUNT TIMEOUT_S
//   MODE: ok | badicrc (reply ICRC wrong) | wrongqpn (reply to another QP number)
// Exits 0 once COUNT valid requests were answered and none was malformed; 1 otherwise (timeout,
// a malformed request); 2 on bad usage or a socket error. Prints its counters.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ina/proto/crc32c.h"
#include "ina/proto/roce.h"
#include "ina/proto/wire.h"

namespace {

using namespace ina::proto;  // NOLINT: a test tool, the codec's names read better unqualified

struct Counters {
  long datagrams = 0, bad_icrc = 0, bad_bth = 0, wrong_qp = 0, bad_ina = 0, replied = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: roce_reflector IP QPN QKEY ok|badicrc|wrongqpn COUNT TIMEOUT_S\n");
    return 2;
  }
  in_addr ip{};
  if (inet_pton(AF_INET, argv[1], &ip) != 1) return 2;
  const uint32_t qpn = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 0));
  const uint32_t qkey = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 0));
  const std::string mode = argv[4];
  const long count = std::strtol(argv[5], nullptr, 0);
  const int timeout_s = std::atoi(argv[6]);
  if (mode != "ok" && mode != "badicrc" && mode != "wrongqpn") return 2;

  const int udp = socket(AF_INET, SOCK_DGRAM, 0);
  const int raw = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
  if (udp < 0 || raw < 0) {
    std::perror("roce_reflector: socket");
    return 2;
  }
  // Room for a whole burst of jumbo-MTU skbs (the default buffer holds about 100).
  const int rcvbuf = 32 << 20;
  if (setsockopt(raw, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0) {
    setsockopt(raw, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  }
  const int df = IP_PMTUDISC_DO;
  setsockopt(udp, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof df);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(roce::kUdpPort);
  a.sin_addr = ip;
  if (bind(udp, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("roce_reflector: bind");
    return 2;
  }
  std::printf("roce_reflector: %s:4791 qpn 0x%x qkey 0x%x mode %s, %ld requests in %d s\n", argv[1],
              qpn, qkey, mode.c_str(), count, timeout_s);
  std::fflush(stdout);

  Counters c;
  std::map<uint32_t, uint32_t> psn;  // per destination QP
  std::vector<uint8_t> pkt(9000), out(roce::kIpv4Bytes + roce::kUdpBytes + 9000);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (c.replied < count && std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{raw, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    const ssize_t n = recv(raw, pkt.data(), pkt.size(), 0);
    if (n < static_cast<ssize_t>(roce::kIpv4Bytes + roce::kUdpBytes)) continue;
    const std::span<const uint8_t> dgram(pkt.data(), static_cast<size_t>(n));
    const uint8_t* udph = pkt.data() + roce::kIpv4Bytes;
    if ((pkt[0] & 0x0F) != 5 || Load16(udph + 2) != roce::kUdpPort ||
        std::memcmp(pkt.data() + 16, &ip, 4) != 0) {
      continue;  // not RoCEv2 to us (our own replies, other UDP)
    }
    if (c.datagrams++ == 0) {  // the first request as rxe sent it: a captured ICRC vector
      std::printf("roce_reflector: first datagram ");
      for (ssize_t i = 0; i < n; ++i) std::printf("%02x", pkt[static_cast<size_t>(i)]);
      std::printf("\n");
    }
    if (!roce::IcrcOk(dgram)) {
      ++c.bad_icrc;
      continue;
    }
    roce::UdSend req;
    if (roce::ParseUdSend(dgram.subspan(roce::kIpv4Bytes + roce::kUdpBytes), &req) !=
        roce::ParseError::kOk) {
      ++c.bad_bth;
      continue;
    }
    if (req.dest_qp != qpn || req.qkey != qkey) {
      ++c.wrong_qp;
      continue;
    }
    const auto& m = req.message;
    if (m.size() < kHeaderBytes || GetVersion(m.data()) != kVersion ||
        m.size() != MessageBytes(GetCount(m.data())) || !MessageCrcOk(m)) {
      ++c.bad_ina;
      continue;
    }
    std::vector<uint8_t> reply(m.begin(), m.end());
    for (size_t o = kHeaderBytes; o + 4 + kCrcBytes <= reply.size(); o += 4) {
      Store32(reply.data() + o, Load32(reply.data() + o) + 1);
    }
    SealMessage(reply.data(), reply.size() - kCrcBytes);
    roce::UdSend rep;
    rep.dest_qp = mode == "wrongqpn" ? (req.src_qp + 0x100) & 0xFFFFFF : req.src_qp;
    rep.src_qp = qpn;
    rep.qkey = qkey;
    rep.psn = psn[req.src_qp]++;
    rep.message = reply;
    uint8_t* udp_payload = out.data() + roce::kIpv4Bytes + roce::kUdpBytes;
    const size_t len = roce::BuildUdSend(rep, {udp_payload, out.size() - 28});
    uint32_t src_be = 0;
    std::memcpy(&src_be, pkt.data() + 12, 4);
    roce::BuildIpv4Udp(ip.s_addr, src_be, roce::kUdpPort, roce::kUdpPort, 0, len, out.data());
    const std::span<uint8_t> dg(out.data(), roce::kIpv4Bytes + roce::kUdpBytes + len);
    uint32_t icrc = roce::ComputeIcrc(dg);
    if (mode == "badicrc") icrc ^= 1;
    roce::StoreIcrc(dg.data() + dg.size() - roce::kIcrcBytes, icrc);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(roce::kUdpPort);
    std::memcpy(&to.sin_addr, &src_be, 4);
    if (sendto(udp, udp_payload, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) !=
        static_cast<ssize_t>(len)) {
      std::perror("roce_reflector: sendto");
      return 2;
    }
    ++c.replied;
  }
  std::printf(
      "roce_reflector: datagrams %ld bad_icrc %ld bad_bth %ld wrong_qp %ld bad_ina %ld "
      "replied %ld\n",
      c.datagrams, c.bad_icrc, c.bad_bth, c.wrong_qp, c.bad_ina, c.replied);
  const bool clean = c.bad_icrc == 0 && c.bad_bth == 0 && c.wrong_qp == 0 && c.bad_ina == 0;
  return c.replied >= count && clean ? 0 : 1;
}
