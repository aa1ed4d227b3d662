// Two DPDK ports of one process joined by net_memif (server and client on one socket file):
// datagrams both ways with UDP checksums computed and verified, the sender's MAC learnt, zero-copy
// TX, foreign frames counted. Skips with the reason where the EAL cannot start (not root, DPDK
// not built). EAL: --no-huge, a file prefix unique to this process, removed afterwards.
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
        sock_ + " --vdev net_memif1,role=client,socket=" + sock_;
    Status st = StartEal(args);
    if (!st.ok()) skip_ = "EAL did not start: " + st.ToString();
  }
  static void TearDownTestSuite() {
    StopEal();
    std::error_code ec;
    std::filesystem::remove_all("/var/run/dpdk/" + prefix_, ec);
    std::filesystem::remove(sock_, ec);
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

}  // namespace
}  // namespace ina::net
