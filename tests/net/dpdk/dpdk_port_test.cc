// Two DPDK ports of one process joined by net_memif (server and client on one socket file):
// datagrams both ways with UDP checksums computed and verified, the sender's MAC learnt, zero-copy
// TX, foreign frames counted. A second pair carries whole IPv4 datagrams with the RoCE codec
// around them (the RoCE port over DPDK, roce.h). A third pair has two queues on either end: what
// a client queue sends arrives on the server's queue of the same index, and back. Skips with the
// reason where the EAL cannot start (not root, DPDK not built). EAL: --no-huge, a file prefix
// unique to this process, removed afterwards.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ina/net/dpdk.h"
#include "ina/net/frame.h"
#include "ina/net/roce.h"

namespace ina::net {
namespace {

using namespace std::chrono_literals;

class DpdkPortTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!kDpdkBuilt) {
      skip_ = "DPDK not built";
      return;
    }
    if (geteuid() != 0) {
      skip_ = "needs root for the EAL";
      return;
    }
    prefix_ = "ina_nettest_" + std::to_string(getpid());
    sock_ = "/tmp/" + prefix_ + ".sock";
    const std::string args =
        "--no-huge -m 128 --no-pci --no-telemetry --log-level=*:warning "
        "--file-prefix " +
        prefix_ +
        " -l 0 --vdev net_memif0,role=server,"
        "socket=" +
        sock_ + " --vdev net_memif1,role=client,socket=" + sock_ +
        " --vdev net_memif2,role=server,socket=" + sock_ +
        "r --vdev net_memif3,role=client,socket=" + sock_ + "r" +
        " --vdev net_memif4,role=server,socket=" + sock_ +
        "q --vdev net_memif5,role=client,socket=" + sock_ + "q";
    Status st = StartEal(args);
    if (!st.ok()) skip_ = "EAL did not start: " + st.ToString();
  }
  static void TearDownTestSuite() {
    StopEal();
    std::error_code ec;
    std::filesystem::remove_all("/var/run/dpdk/" + prefix_, ec);
    std::filesystem::remove(sock_, ec);
    std::filesystem::remove(sock_ + "r", ec);
    std::filesystem::remove(sock_ + "q", ec);
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }

  static std::string skip_, prefix_, sock_;
};
std::string DpdkPortTest::skip_, DpdkPortTest::prefix_, DpdkPortTest::sock_;

std::vector<uint8_t> Payload(uint16_t id, size_t len) {
  std::vector<uint8_t> v(len);
  for (size_t j = 0; j < len; ++j) v[j] = static_cast<uint8_t>(id + 3 * j);
  v[0] = static_cast<uint8_t>(id >> 8);
  v[1] = static_cast<uint8_t>(id);
  return v;
}

// Receives until `want` packets or the timeout.
std::vector<std::vector<uint8_t>> Recv(Port& port, size_t want, std::vector<Endpoint>* from,
                                       std::chrono::milliseconds timeout = 3000ms) {
  std::vector<std::vector<uint8_t>> out;
  std::array<std::array<uint8_t, 2048>, kBurst> bufs;
  std::array<Packet, kBurst> pk;
  std::array<Endpoint, kBurst> ep;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < kBurst; ++i) pk[i] = {bufs[i].data(), 2048, 0, 0, &ep[i]};
    (void)port.WaitRx(10ms);
    auto n = port.RxBurst(pk);
    EXPECT_TRUE(n.ok());
    for (size_t i = 0; n.ok() && i < *n; ++i) {
      out.emplace_back(pk[i].data, pk[i].data + pk[i].len);
      if (from != nullptr) from->push_back(ep[i]);
    }
  }
  return out;
}

TEST_F(DpdkPortTest, DatagramsBothWaysWithChecksums) {
  DpdkPortConfig sc;
  sc.name = "net_memif0";
  sc.ip = "10.88.0.1";
  sc.udp_port = 47000;
  sc.tx_mbufs = 1023;
  auto server = OpenDpdkPort(sc);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  DpdkPortConfig cc;
  cc.name = "net_memif1";
  cc.ip = "10.88.1.1";
  cc.udp_port = 40000;
  cc.peer_ip = "10.88.0.1";
  cc.peer_port = 47000;
  cc.zero_copy = true;
  cc.tx_mbufs = 1023;
  auto client = OpenDpdkPort(cc);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*server)->name(), "net_memif0");
  EXPECT_FALSE(OpenDpdkPort(sc).ok());  // in use

  // The memif link comes up asynchronously: send until the first datagram gets through.
  const std::vector<uint8_t> hello = Payload(9999, 22);
  std::vector<Endpoint> from;
  std::vector<std::vector<uint8_t>> got;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    TxPacket t{hello.data(), 22, nullptr};
    ASSERT_TRUE((*client)->TxBurst({&t, 1}).ok());
    got = Recv(**server, 1, &from, 200ms);
  }
  ASSERT_FALSE(got.empty()) << "memif link did not come up";
  (void)Recv(**server, 1000, nullptr, 300ms);  // copies of hello still in flight

  constexpr uint16_t kN = 200;
  std::vector<std::vector<uint8_t>> data;
  for (uint16_t id = 0; id < kN; ++id) data.push_back(Payload(id, 22 + (id % 4) * 341));
  size_t sent = 0;
  std::vector<TxPacket> tx;
  // Every other packet is marked kTxPayloadChecked (sent with UDP checksum 0, port.h): both kinds
  // arrive intact and none counts as a bad checksum.
  for (auto& d : data) {
    tx.push_back({d.data(), static_cast<uint32_t>(d.size()), nullptr,
                  tx.size() % 2 == 0 ? kTxPayloadChecked : 0u});
  }
  std::vector<std::vector<uint8_t>> rx;
  from.clear();
  while (sent < tx.size()) {
    auto n = (*client)->TxBurst({tx.data() + sent, std::min<size_t>(32, tx.size() - sent)});
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    sent += *n;
    for (auto& g : Recv(**server, *n, &from)) rx.push_back(std::move(g));
  }
  ASSERT_EQ(rx.size(), kN);
  for (uint16_t id = 0; id < kN; ++id) EXPECT_EQ(rx[id], data[id]) << id;
  EXPECT_EQ((*server)->stats().rx_bad_csum, 0u);
  const auto& sa = reinterpret_cast<const sockaddr_in&>(from[0].addr);
  EXPECT_EQ(ntohs(sa.sin_port), 40000);
  uint8_t mac[6];
  GetMac(from[0], mac);
  EXPECT_NE(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5], 0) << "sender MAC recorded";

  // Replies to the recorded sender (its MAC and address) reach the connected client. A memif
  // server can send only into buffers the client's RX has handed it: retry while it polls.
  std::vector<TxPacket> back;
  for (uint16_t id = 0; id < 20; ++id) {
    back.push_back({data[id].data(), static_cast<uint32_t>(data[id].size()), &from[id]});
  }
  std::vector<std::vector<uint8_t>> rb;
  size_t bsent = 0;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (rb.size() < back.size() && std::chrono::steady_clock::now() < until) {
    auto bs = (*server)->TxBurst({back.data() + bsent, back.size() - bsent});
    ASSERT_TRUE(bs.ok()) << bs.status().ToString();
    bsent += *bs;
    for (auto& g : Recv(**client, bsent - rb.size(), nullptr)) rb.push_back(std::move(g));
    if (*bs == 0) (void)Recv(**client, 1, nullptr, 10ms);
  }
  ASSERT_EQ(rb.size(), back.size());
  for (uint16_t id = 0; id < 20; ++id) EXPECT_EQ(rb[id], data[id]) << id;
  EXPECT_EQ((*client)->stats().rx_bad_csum, 0u);

  // Too long for a frame: an error naming it, nothing sent.
  std::vector<uint8_t> big(kMaxUdpPayload + 1);
  TxPacket t{big.data(), static_cast<uint32_t>(big.size()), nullptr};
  auto e = (*client)->TxBurst({&t, 1});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);

  // Close the client first and give the EAL interrupt thread time to handle the server's side of
  // the disconnect: memif's disconnect callback runs on that thread and may touch the peer port,
  // which must not be closed under it (both ends live in this one process only in this test).
  client->reset();
  std::this_thread::sleep_for(200ms);
  server->reset();
}

// The RoCE port over DPDK: WrapRoce around datagram ports on either end of a memif link (the
// "switch" QP 0x100 at 10.89.0.1, a "worker" QP 0x2a at 10.89.0.2). Messages arrive from the
// sender's RoCE peer (its QP, its MAC), replies follow each destination QP's PSN sequence, and
// frames the codec refuses are counted under their reasons.
TEST_F(DpdkPortTest, RoceOverDatagramPortsBothWays) {
  auto open = [](const char* name, const char* ip) {
    DpdkPortConfig c;
    c.name = name;
    c.ip = ip;
    c.udp_port = 4791;
    c.ipv4_datagrams = true;
    c.tx_mbufs = 1023;
    return OpenDpdkPort(c);
  };
  auto sw_dg = open("net_memif2", "10.89.0.1");
  ASSERT_TRUE(sw_dg.ok()) << sw_dg.status().ToString();
  auto wk_dg = open("net_memif3", "10.89.0.2");
  ASSERT_TRUE(wk_dg.ok()) << wk_dg.status().ToString();
  RoceIdentity sw_id, wk_id;
  ASSERT_EQ(inet_pton(AF_INET, "10.89.0.1", &sw_id.ip_be), 1);
  ASSERT_EQ(inet_pton(AF_INET, "10.89.0.2", &wk_id.ip_be), 1);
  sw_id.qpn = 0x100;
  wk_id.qpn = 0x2a;
  std::unique_ptr<Port> sw = WrapRoce(std::move(*sw_dg), sw_id);
  std::unique_ptr<Port> wk = WrapRoce(std::move(*wk_dg), wk_id);
  EXPECT_EQ(sw->kind(), "roce(dpdk)");
  EXPECT_EQ(sw->name(), "net_memif2");
  const Endpoint to_sw = RoceEndpoint(sw_id.ip_be, sw_id.qpn);  // no MAC: memif is point to point

  // Until the link is up the first messages are lost; then 100 in order.
  std::vector<Endpoint> from;
  std::vector<std::vector<uint8_t>> got;
  const std::vector<uint8_t> hello = Payload(7777, 40);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    TxPacket t{hello.data(), 40, &to_sw};
    ASSERT_TRUE(wk->TxBurst({&t, 1}).ok());
    got = Recv(*sw, 1, &from, 200ms);
  }
  ASSERT_FALSE(got.empty()) << "memif link did not come up";
  EXPECT_EQ(got[0], hello);
  (void)Recv(*sw, 1000, nullptr, 300ms);
  uint32_t ip = 0, qpn = 0;
  ASSERT_TRUE(ParseRoceEndpoint(from[0], &ip, &qpn));
  EXPECT_EQ(ip, wk_id.ip_be);
  EXPECT_EQ(qpn, wk_id.qpn);
  uint8_t mac[6];
  GetMac(from[0], mac);
  EXPECT_NE(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5], 0) << "sender MAC kept";

  std::vector<std::vector<uint8_t>> data;
  for (uint16_t id = 0; id < 100; ++id) data.push_back(Payload(id, 64 + (id % 3) * 400));
  std::vector<TxPacket> tx;
  for (auto& d : data) tx.push_back({d.data(), static_cast<uint32_t>(d.size()), &to_sw});
  std::vector<std::vector<uint8_t>> rx;
  from.clear();
  size_t sent = 0;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (rx.size() < data.size() && std::chrono::steady_clock::now() < until) {
    if (sent < tx.size()) {
      auto n = wk->TxBurst({tx.data() + sent, std::min<size_t>(32, tx.size() - sent)});
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      sent += *n;
    }
    for (auto& g : Recv(*sw, sent - rx.size(), &from, 200ms)) rx.push_back(std::move(g));
  }
  ASSERT_EQ(rx.size(), data.size());
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(rx[i], data[i]) << i;
  EXPECT_EQ(sw->stats().rx_roce_bad_icrc, 0u);
  EXPECT_EQ(sw->stats().rx_roce_bad_psn, 0u);
  EXPECT_EQ(sw->stats().rx_roce_psn_gaps, 0u);

  // Replies to the recorded peer reach the worker's QP.
  std::vector<TxPacket> back;
  for (size_t i = 0; i < 20; ++i) {
    back.push_back({data[i].data(), static_cast<uint32_t>(data[i].size()), &from[i]});
  }
  std::vector<std::vector<uint8_t>> rb;
  std::vector<Endpoint> rb_from;
  size_t bsent = 0;
  const auto bu = std::chrono::steady_clock::now() + 5s;
  while (rb.size() < back.size() && std::chrono::steady_clock::now() < bu) {
    auto bs = sw->TxBurst({back.data() + bsent, back.size() - bsent});
    ASSERT_TRUE(bs.ok()) << bs.status().ToString();
    bsent += *bs;
    for (auto& g : Recv(*wk, bsent - rb.size(), &rb_from)) rb.push_back(std::move(g));
    if (*bs == 0) (void)Recv(*wk, 1, nullptr, 10ms);
  }
  ASSERT_EQ(rb.size(), back.size());
  for (size_t i = 0; i < back.size(); ++i) EXPECT_EQ(rb[i], data[i]) << i;
  ASSERT_TRUE(ParseRoceEndpoint(rb_from[0], &ip, &qpn));
  EXPECT_EQ(qpn, sw_id.qpn);
  EXPECT_EQ(wk->stats().rx_roce_bad_psn, 0u);

  // A message to a QP that is not the switch's is counted and dropped there, not delivered.
  const Endpoint wrong_qp = RoceEndpoint(sw_id.ip_be, 0x101);
  TxPacket t{hello.data(), 40, &wrong_qp};
  ASSERT_TRUE(wk->TxBurst({&t, 1}).ok());
  const auto wu = std::chrono::steady_clock::now() + 3s;
  while (sw->stats().rx_roce_wrong_qpn == 0 && std::chrono::steady_clock::now() < wu) {
    EXPECT_TRUE(Recv(*sw, 1, nullptr, 50ms).empty());
  }
  EXPECT_EQ(sw->stats().rx_roce_wrong_qpn, 1u);
  // Not RoCE: a destination that is no RoCE peer is refused with an error naming it.
  Endpoint plain = *MakeEndpoint("10.89.0.1", 4791);
  TxPacket u{hello.data(), 40, &plain};
  auto e = wk->TxBurst({&u, 1});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);

  wk.reset();
  std::this_thread::sleep_for(200ms);
  sw.reset();
}

// Two queues on each end of a memif link: server queue q listens on 47100 + q, client queue q
// (10.90.1.1:40000 + q) is connected to it. Each client queue's datagrams arrive on the server
// queue of its index and nowhere else (the other queue would count them as foreign), and the
// replies of server queue q reach client queue q. A taken queue, or another queue count for a
// port in use, is refused.
TEST_F(DpdkPortTest, QueuePairsCarryTheirOwnTraffic) {
  constexpr unsigned kQ = 2;
  std::vector<std::unique_ptr<Port>> server, client;
  for (unsigned q = 0; q < kQ; ++q) {
    DpdkPortConfig sc;
    sc.name = "net_memif4";
    sc.ip = "10.90.0.1";
    sc.udp_port = static_cast<uint16_t>(47100 + q);
    sc.queues = kQ;
    sc.queue = q;
    sc.tx_mbufs = 1023;
    auto s = OpenDpdkPort(sc);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_FALSE(OpenDpdkPort(sc).ok()) << "queue " << q << " opened twice";
    server.push_back(std::move(*s));
    DpdkPortConfig cc;
    cc.name = "net_memif5";
    cc.ip = "10.90.1.1";
    cc.udp_port = static_cast<uint16_t>(40000 + q);
    cc.peer_ip = "10.90.0.1";
    cc.peer_port = static_cast<uint16_t>(47100 + q);
    cc.queues = kQ;
    cc.queue = q;
    cc.zero_copy = true;
    cc.tx_mbufs = 1023;
    auto c = OpenDpdkPort(cc);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client.push_back(std::move(*c));
  }
  DpdkPortConfig other;
  other.name = "net_memif4";
  other.ip = "10.90.0.1";
  other.udp_port = 47200;
  other.queues = 3;
  other.queue = 2;
  EXPECT_EQ(OpenDpdkPort(other).status().code(), StatusCode::kFailedPrecondition);
  other.queues = 2;
  other.queue = 2;
  EXPECT_EQ(OpenDpdkPort(other).status().code(), StatusCode::kInvalidArgument);

  // The link comes up asynchronously: queue 0 sends until its first datagram gets through.
  const std::vector<uint8_t> hello = Payload(9999, 22);
  std::vector<std::vector<uint8_t>> got;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    TxPacket t{hello.data(), 22, nullptr};
    ASSERT_TRUE(client[0]->TxBurst({&t, 1}).ok());
    got = Recv(*server[0], 1, nullptr, 200ms);
  }
  ASSERT_FALSE(got.empty()) << "memif link did not come up";
  (void)Recv(*server[0], 1000, nullptr, 300ms);

  constexpr uint16_t kN = 64;
  for (unsigned q = 0; q < kQ; ++q) {
    SCOPED_TRACE("queue " + std::to_string(q));
    std::vector<std::vector<uint8_t>> data;
    std::vector<TxPacket> tx;
    for (uint16_t id = 0; id < kN; ++id) data.push_back(Payload(id + 1000 * q, 100 + id));
    for (auto& d : data) tx.push_back({d.data(), static_cast<uint32_t>(d.size()), nullptr});
    std::vector<std::vector<uint8_t>> rx;
    std::vector<Endpoint> from;
    size_t sent = 0;
    while (sent < tx.size()) {
      auto n = client[q]->TxBurst({tx.data() + sent, tx.size() - sent});
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      sent += *n;
      for (auto& g : Recv(*server[q], *n, &from)) rx.push_back(std::move(g));
    }
    ASSERT_EQ(rx.size(), kN);
    for (uint16_t id = 0; id < kN; ++id) EXPECT_EQ(rx[id], data[id]) << id;
    EXPECT_TRUE(Recv(*server[1 - q], 1, nullptr, 100ms).empty()) << "on the other queue";
    // Back on the same queue: server queue q answers the sender's address.
    std::vector<TxPacket> back;
    for (uint16_t id = 0; id < 8; ++id) {
      back.push_back({data[id].data(), static_cast<uint32_t>(data[id].size()), &from[id]});
    }
    std::vector<std::vector<uint8_t>> rb;
    size_t bsent = 0;
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (rb.size() < back.size() && std::chrono::steady_clock::now() < until) {
      auto bs = server[q]->TxBurst({back.data() + bsent, back.size() - bsent});
      ASSERT_TRUE(bs.ok()) << bs.status().ToString();
      bsent += *bs;
      for (auto& g : Recv(*client[q], bsent - rb.size(), nullptr)) rb.push_back(std::move(g));
      if (*bs == 0) (void)Recv(*client[q], 1, nullptr, 10ms);
    }
    ASSERT_EQ(rb.size(), back.size());
    for (uint16_t id = 0; id < 8; ++id) EXPECT_EQ(rb[id], data[id]) << id;
  }
  for (unsigned q = 0; q < kQ; ++q) {
    EXPECT_EQ(server[q]->stats().rx_other, 0u) << "queue " << q << " saw another queue's frames";
    EXPECT_EQ(client[q]->stats().rx_other, 0u) << "queue " << q << " saw another queue's frames";
  }
  // As above: the client's side first, then the server's.
  client.clear();
  std::this_thread::sleep_for(200ms);
  server.clear();
}

}  // namespace
}  // namespace ina::net
