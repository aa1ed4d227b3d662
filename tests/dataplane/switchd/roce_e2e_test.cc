// ina-switchd --io roce end to end on loopback: the real binary on 127.0.0.4:4791, fake workers as
// QPs behind one UDP socket on 127.0.0.5:4791 speaking RoCEv2 UD SENDs built with net/roce.h (DF:
// IP ID 0, so the ICRC of what the kernel sends is known). The switch maps QPs to ranks at JOIN,
// answers each on its own QP with a PSN sequence per QP and a good ICRC, aggregates as over UDP,
// drops data for a rank from another QP (drop_foreign_src) and counts bad RoCE packets. Needs a
// raw socket (root); skipped otherwise.
#include <unistd.h>

#include <map>
#include <optional>
#include <utility>

#include "ina/net/roce.h"
#include "support/switchd_process.h"

namespace ina::test {
namespace {

namespace r = ::ina::proto::roce;
constexpr size_t kL3L4 = r::kIpv4Bytes + r::kUdpBytes;
constexpr uint32_t kSwitchQpn = 0x100;

uint32_t Ip(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a.s_addr;
}

struct Reply {
  uint32_t dest_qp = 0;
  uint32_t psn = 0;
  Bytes message;
};

// QPs behind one socket: each Send names the sending QP and gets the next PSN of that QP.
class RoceClient {
 public:
  RoceClient() {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    const int df = IP_PMTUDISC_DO;
    setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof df);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(r::kUdpPort);
    a.sin_addr.s_addr = me_.ip_be;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  }
  ~RoceClient() { close(fd_); }

  void Send(uint32_t qpn, const Bytes& msg, uint32_t dst_qpn = kSwitchQpn) {
    ina::net::RoceIdentity q = me_;
    q.qpn = qpn;
    Bytes out(2048);
    const size_t len = ina::net::RoceTx(msg, q, sw_ip_, dst_qpn, psn_[qpn]++, out);
    ASSERT_GT(len, 0u);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(r::kUdpPort);
    to.sin_addr.s_addr = sw_ip_;
    ASSERT_EQ(sendto(fd_, out.data() + kL3L4, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(len));
  }
  // The next reply (2 s at most), its ICRC checked against the datagram the switch's kernel sent.
  std::optional<Reply> Recv() {
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, 2000) != 1) return std::nullopt;
    Bytes dg(4096);
    const ssize_t n = recv(fd_, dg.data() + kL3L4, dg.size() - kL3L4, 0);
    if (n <= 0) return std::nullopt;
    dg.resize(kL3L4 + static_cast<size_t>(n));
    r::BuildIpv4Udp(sw_ip_, me_.ip_be, r::kUdpPort, r::kUdpPort, 0, static_cast<size_t>(n),
                    dg.data());
    EXPECT_TRUE(r::IcrcOk(dg)) << "a reply whose ICRC rxe would drop";
    r::UdSend u;
    EXPECT_EQ(r::ParseUdSend(std::span<const uint8_t>(dg).subspan(kL3L4), &u), r::ParseError::kOk);
    EXPECT_EQ(u.src_qp, kSwitchQpn);
    EXPECT_EQ(u.qkey, me_.qkey);
    return Reply{u.dest_qp, u.psn, Bytes(u.message.begin(), u.message.end())};
  }

 private:
  int fd_ = -1;
  ina::net::RoceIdentity me_{Ip("127.0.0.5"), 0, 0x494E4100};
  uint32_t sw_ip_ = Ip("127.0.0.4");
  std::map<uint32_t, uint32_t> psn_;
};

std::vector<int32_t> Elems(uint16_t rank, uint16_t slot, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[i] = (rank + 1) * 1000003 * (i + 1) + slot * 31;
  return v;
}

TEST(SwitchdRoce, QpsAreRanksEachAnsweredOnItsQpWithItsOwnPsnSequence) {
  if (geteuid() != 0) GTEST_SKIP() << "--io roce needs a raw socket (CAP_NET_RAW): not root";
  SwitchProcess sw({"--io", "roce", "--bind", "127.0.0.4", "--slots", "16"});
  ASSERT_EQ(sw.port(), r::kUdpPort);
  RoceClient c;
  const uint32_t qp[2] = {0x21, 0x22};  // rank r on qp[r], one address
  const uint16_t job = 40;
  for (uint16_t rk = 0; rk < 2; ++rk) c.Send(qp[rk], Join(job, rk, 2, 64, 2));
  std::map<uint32_t, std::vector<uint32_t>> psns;  // per destination QP, in arrival order
  for (int i = 0; i < 2; ++i) {
    auto a = c.Recv();
    ASSERT_TRUE(a.has_value()) << "join_ack " << i;
    const p::Header h = p::DecodeHeader(a->message.data());
    ASSERT_EQ(h.type, p::MsgType::kJoinAck);
    EXPECT_EQ(a->dest_qp, qp[h.rank]) << "rank " << h.rank << "'s ack went to another QP";
    psns[a->dest_qp].push_back(a->psn);
  }
  // Data for rank 0 from rank 1's QP: not rank 0's peer.
  c.Send(qp[1], Data(job, 0, 0, 0, Elems(0, 0, 64)));
  for (uint16_t s = 0; s < 2; ++s) {
    for (uint16_t rk = 0; rk < 2; ++rk) c.Send(qp[rk], Data(job, rk, s, 0, Elems(rk, s, 64)));
  }
  std::map<uint32_t, int> results;
  for (int i = 0; i < 4; ++i) {
    auto a = c.Recv();
    ASSERT_TRUE(a.has_value()) << "result " << i;
    const p::Header h = p::DecodeHeader(a->message.data());
    ASSERT_EQ(h.type, p::MsgType::kResult);
    std::vector<int32_t> want(64);
    const auto e0 = Elems(0, h.slot, 64), e1 = Elems(1, h.slot, 64);
    for (size_t j = 0; j < 64; ++j) {
      want[j] = static_cast<int32_t>(static_cast<uint32_t>(e0[j]) + static_cast<uint32_t>(e1[j]));
    }
    EXPECT_EQ(Payload(a->message), want) << "slot " << h.slot;
    ++results[a->dest_qp];
    psns[a->dest_qp].push_back(a->psn);
  }
  EXPECT_EQ(results[qp[0]], 2);
  EXPECT_EQ(results[qp[1]], 2);
  const std::vector<uint32_t> seq = {0, 1, 2};
  EXPECT_EQ(psns[qp[0]], seq);
  EXPECT_EQ(psns[qp[1]], seq);
  // A packet to another QP number: counted, dropped (the net/roce unit tests cover the rest).
  c.Send(qp[0], Data(job, 0, 0, 1, Elems(0, 0, 64)), 0x333);
  auto counters = sw.Stop();
  EXPECT_EQ(counters["drop_foreign_src"], 1u);
  EXPECT_EQ(counters["roce_wrong_qpn"], 1u);
  EXPECT_EQ(counters["rx_data"], 4u);
  EXPECT_EQ(counters["results"], 2u);
  EXPECT_EQ(counters["join_acks"], 2u);
  for (const char* k : {"roce_short", "roce_bad_icrc", "roce_bad_opcode", "roce_bad_key",
                        "roce_bad_psn", "roce_psn_gaps", "tx_errors"}) {
    EXPECT_EQ(counters[k], 0u) << k;
  }
}

}  // namespace
}  // namespace ina::test
