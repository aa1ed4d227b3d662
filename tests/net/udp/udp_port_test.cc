// The kernel UDP port on loopback: bursts both ways, senders in Packet::from, GSO trains split
// by GRO across RxBurst calls, truncation, ICMP from a connected peer, reuseport steering, the
// path MTU and no IP fragmentation.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ina/net/udp.h"

namespace ina::net {
namespace {

using namespace std::chrono_literals;

struct Pair {
  std::unique_ptr<Port> server;  // unconnected, 127.0.0.1:ephemeral
  std::unique_ptr<Port> client;  // connected to it
};

Pair MakePair(bool gso) {
  Pair p;
  UdpPortConfig s;
  s.bind_ip = "127.0.0.1";
  s.gso_gro = gso;
  auto server = OpenUdpPort(s);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  p.server = std::move(*server);
  UdpPortConfig c;
  c.bind_ip = "127.0.0.1";
  c.peer_ip = "127.0.0.1";
  c.peer_port = UdpLocalPort(*p.server);
  c.gso_gro = gso;
  auto client = OpenUdpPort(c);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  p.client = std::move(*client);
  return p;
}

// Packet i: len bytes, every byte (i + j) & 0xFF, the first two bytes the index.
std::vector<uint8_t> Payload(size_t i, size_t len) {
  std::vector<uint8_t> v(len);
  for (size_t j = 0; j < len; ++j) v[j] = static_cast<uint8_t>(i + j);
  if (len >= 2) {
    v[0] = static_cast<uint8_t>(i >> 8);
    v[1] = static_cast<uint8_t>(i);
  }
  return v;
}

// Receives until `want` packets arrived or 2 s passed, `per_call` at a time; copies them out.
std::vector<std::vector<uint8_t>> RecvAll(Port& port, size_t want, size_t per_call,
                                          std::vector<Endpoint>* from = nullptr) {
  std::vector<std::vector<uint8_t>> out;
  std::vector<std::array<uint8_t, 2048>> bufs(per_call);
  std::vector<Packet> pk(per_call);
  std::vector<Endpoint> ep(per_call);
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (out.size() < want && std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < per_call; ++i) pk[i] = {bufs[i].data(), 2048, 0, 0, &ep[i]};
    auto w = port.WaitRx(10ms);
    EXPECT_TRUE(w.ok());
    auto n = port.RxBurst(pk);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    if (!n.ok()) break;
    for (size_t i = 0; i < *n; ++i) {
      out.emplace_back(pk[i].data, pk[i].data + pk[i].len);
      if (from != nullptr) from->push_back(ep[i]);
    }
  }
  return out;
}

class UdpPortTest : public ::testing::TestWithParam<bool> {};

TEST_P(UdpPortTest, BurstsBothWaysWithSenders) {
  Pair p = MakePair(GetParam());
  std::vector<std::vector<uint8_t>> data;
  std::vector<TxPacket> tx;
  for (size_t i = 0; i < 40; ++i) data.push_back(Payload(i, 22 + (i % 5) * 100));
  for (auto& d : data) tx.push_back({d.data(), static_cast<uint32_t>(d.size()), nullptr});
  auto sent = p.client->TxBurst(tx);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  ASSERT_EQ(*sent, tx.size());
  std::vector<Endpoint> from;
  auto got = RecvAll(*p.server, tx.size(), 16, &from);
  ASSERT_EQ(got.size(), tx.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], data[i]) << i;
  // Reply to the sender the server saw.
  const std::vector<uint8_t> reply = Payload(7, 100);
  TxPacket r{reply.data(), 100, &from[0]};
  auto rs = p.server->TxBurst({&r, 1});
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  EXPECT_EQ(*rs, 1u);
  auto back = RecvAll(*p.client, 1, 4);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], reply);
  EXPECT_EQ(p.server->stats().rx_packets, tx.size());
  EXPECT_EQ(p.client->stats().tx_packets, tx.size());
}

TEST_P(UdpPortTest, EqualSizeTrainIsSplitAcrossSmallBursts) {
  Pair p = MakePair(GetParam());
  std::vector<std::vector<uint8_t>> data;
  std::vector<TxPacket> tx;
  for (size_t i = 0; i < 64; ++i) data.push_back(Payload(i, 1046));
  data.push_back(Payload(64, 300));  // a shorter one ends the train
  for (auto& d : data) tx.push_back({d.data(), static_cast<uint32_t>(d.size()), nullptr});
  auto sent = p.client->TxBurst(tx);
  ASSERT_TRUE(sent.ok());
  ASSERT_EQ(*sent, tx.size());
  if (GetParam() && p.client->coalesces()) {
    EXPECT_GT(p.client->stats().tx_trains, 0u);
  }
  auto got = RecvAll(*p.server, tx.size(), 7);  // 7 per call: trains split across calls
  ASSERT_EQ(got.size(), tx.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], data[i]) << i;
  EXPECT_EQ(p.server->stats().rx_packets, tx.size());
}

INSTANTIATE_TEST_SUITE_P(GsoGro, UdpPortTest, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? "On" : "Off"; });

// A receive buffer the senders overrun: the kernel's drops are counted (every datagram sent is
// read or dropped; a GSO train arriving whole is dropped as one), and rx_queue_datagrams never
// promises more than the kernel kept (the window a worker asks and a switch grants rest on it).
TEST_P(UdpPortTest, AFullReceiveBufferCountsTheKernelsDropsAndTheQueueEstimateHolds) {
  const bool gso = GetParam();
  constexpr int kAsked = 64 << 10;  // below Debian's net.core.rmem_max: no privilege needed
  UdpPortConfig s;
  s.bind_ip = "127.0.0.1";
  s.gso_gro = gso;
  s.socket_buffer_bytes = kAsked;
  auto server = OpenUdpPort(s);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  UdpPortConfig c;
  c.bind_ip = "127.0.0.1";
  c.peer_ip = "127.0.0.1";
  c.peer_port = UdpLocalPort(**server);
  c.gso_gro = gso;
  auto client = OpenUdpPort(c);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Port& rx = **server;
  EXPECT_EQ(rx.rx_buffer_bytes(), 2u * kAsked) << "the kernel reports twice what was set";
  EXPECT_EQ(rx.rx_kernel_drops(), 0u);
  constexpr size_t kLen = 8218;  // a K=2048 message
  const size_t holds = rx.rx_queue_datagrams(kLen);
  EXPECT_GT(holds, 0u);
  constexpr size_t kSent = 64;  // several times what 128 KiB holds
  std::vector<std::vector<uint8_t>> msgs;
  std::vector<TxPacket> tx;
  for (size_t i = 0; i < kSent; ++i) msgs.push_back(Payload(i, kLen));
  for (auto& m : msgs) tx.push_back({m.data(), static_cast<uint32_t>(m.size()), nullptr, 0});
  size_t sent = 0;
  for (int tries = 0; sent < kSent && tries < 1000; ++tries) {
    auto n = (*client)->TxBurst({tx.data() + sent, kSent - sent});
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    sent += *n;
  }
  ASSERT_EQ(sent, kSent);
  // Loopback delivery (softirq, maybe deferred on a loaded machine) is done when the kernel's
  // drop count stops moving: three 20 ms polls alike (at most 2 s), before anything is read.
  uint64_t last = rx.rx_kernel_drops();
  for (int same = 0, polls = 0; same < 3 && polls < 100; ++polls) {
    std::this_thread::sleep_for(20ms);
    const uint64_t now = rx.rx_kernel_drops();
    same = now == last ? same + 1 : 0;
    last = now;
  }
  size_t got = 0;
  std::vector<std::vector<uint8_t>> bufs(kBurst, std::vector<uint8_t>(16384));
  std::vector<Packet> pk(kBurst);
  for (int quiet = 0; quiet < 3;) {
    for (size_t i = 0; i < kBurst; ++i) pk[i] = {bufs[i].data(), 16384, 0, 0, nullptr};
    auto n = rx.RxBurst(pk);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    for (size_t i = 0; i < *n; ++i) EXPECT_EQ(pk[i].len, kLen);
    got += *n;
    quiet = *n == 0 ? quiet + 1 : 0;
  }
  const uint64_t drops = rx.rx_kernel_drops();
  std::printf("gso %d: buffer %zu B, estimate %zu datagrams, kept %zu of %zu, dropped %llu\n", gso,
              rx.rx_buffer_bytes(), holds, got, kSent, static_cast<unsigned long long>(drops));
  EXPECT_GT(drops, 0u);
  if (!gso || !rx.coalesces()) {
    EXPECT_EQ(got + drops, kSent) << "one drop per datagram";
  } else {
    // The kernel drops a GSO train that arrives whole (GRO) as one: 7 datagrams of 8218 bytes
    // fill a train (65507 bytes at most).
    EXPECT_LE(got + drops, kSent);
    EXPECT_GE(got + 7 * drops, kSent);
  }
  EXPECT_EQ(rx.stats().rx_kernel_drops, drops);
  EXPECT_GE(got, holds) << "the estimate promised more than the kernel kept";
}

TEST(UdpPort, SmallReceiveBufferSaysWhatTheKernelGaveAndHowToRaiseIt) {
  EXPECT_EQ(SmallReceiveBuffer(2u << 20, 1 << 20), "");
  EXPECT_EQ(SmallReceiveBuffer(0, 1 << 20), "") << "no kernel socket";
  EXPECT_EQ(SmallReceiveBuffer(1 << 20, 0), "") << "the kernel's default asked";
  const std::string s = SmallReceiveBuffer(425984, 8 << 20);  // Debian's rmem_max, doubled
  EXPECT_NE(s.find("208 KiB"), std::string::npos) << s;
  EXPECT_NE(s.find("8192 KiB"), std::string::npos) << s;
  EXPECT_NE(s.find("sysctl -w net.core.rmem_max=8388608"), std::string::npos) << s;
  EXPECT_NE(s.find("CAP_NET_ADMIN"), std::string::npos) << s;
}

TEST(UdpPort, LongerThanTheBufferIsFlaggedTruncated) {
  Pair p = MakePair(false);
  const std::vector<uint8_t> d = Payload(1, 500);
  TxPacket t{d.data(), 500, nullptr};
  ASSERT_TRUE(p.client->TxBurst({&t, 1}).ok());
  std::array<uint8_t, 100> buf;
  Packet pk{buf.data(), 100, 0, 0, nullptr};
  ASSERT_TRUE(p.server->WaitRx(1s).ok());
  auto n = p.server->RxBurst({&pk, 1});
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, 1u);
  EXPECT_EQ(pk.flags & kPacketTruncated, kPacketTruncated);
  EXPECT_LE(pk.len, 100u);
  EXPECT_EQ(p.server->stats().rx_truncated, 1u);
}

// In a network namespace of its own whose loopback has a 1500-byte MTU: the connected port says
// 1472 (1500 less IPv4 and UDP), sends that much, and refuses one byte more instead of sending IP
// fragments; the unconnected one says the largest datagram. Needs root (ip netns).
TEST(UdpPort, ConnectedPortSaysItsPathMtuAndNeverFragments) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace with a 1500-byte MTU)";
  const std::string ns = "inaudpmtu" + std::to_string(getpid());
  ASSERT_EQ(
      std::system(("ip netns add " + ns + " && ip -n " + ns + " link set lo mtu 1500 up").c_str()),
      0);
  struct Cleanup {
    std::string ns;
    ~Cleanup() { (void)std::system(("ip netns del " + ns + " 2>/dev/null").c_str()); }
  } cleanup{ns};
  // Sockets belong to the namespace of the thread that made them: make the pair inside, return.
  const int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  const int there = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(home, 0);
  ASSERT_GE(there, 0);
  ASSERT_EQ(setns(there, CLONE_NEWNET), 0) << std::strerror(errno);
  Pair p = MakePair(/*gso=*/true);
  ASSERT_EQ(setns(home, CLONE_NEWNET), 0) << std::strerror(errno);
  close(home);
  close(there);
  ASSERT_TRUE(p.client && p.server);
  EXPECT_EQ(p.client->max_datagram_bytes(), 1472u);
  EXPECT_EQ(p.server->max_datagram_bytes(), kMaxDatagramBytes);

  const std::vector<uint8_t> fits = Payload(1, 1472);
  TxPacket t{fits.data(), 1472, nullptr};
  auto sent = p.client->TxBurst({&t, 1});
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_EQ(*sent, 1u);
  const auto got = RecvAll(*p.server, 1, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], fits);

  // One byte more, alone and as a GSO train of two: refused, nothing reaches the peer.
  const std::vector<uint8_t> big = Payload(2, 1473);
  TxPacket one{big.data(), 1473, nullptr};
  auto refused = p.client->TxBurst({&one, 1});
  EXPECT_FALSE(refused.ok());
  std::array<TxPacket, 2> train = {one, one};
  auto refused2 = p.client->TxBurst(train);
  EXPECT_FALSE(refused2.ok());
  EXPECT_TRUE(RecvAll(*p.server, 1, 1).empty()) << "a datagram above the MTU left as fragments";
}

TEST(UdpPort, ConnectedPeerThatIsNotThereIsUnavailable) {
  // Bind then close a server to get a port nobody listens on.
  uint16_t dead = 0;
  {
    UdpPortConfig s;
    s.bind_ip = "127.0.0.1";
    auto server = OpenUdpPort(s);
    ASSERT_TRUE(server.ok());
    dead = UdpLocalPort(**server);
  }
  UdpPortConfig c;
  c.bind_ip = "127.0.0.1";
  c.peer_ip = "127.0.0.1";
  c.peer_port = dead;
  auto client = OpenUdpPort(c);
  ASSERT_TRUE(client.ok());
  const std::vector<uint8_t> d = Payload(1, 30);
  TxPacket t{d.data(), 30, nullptr};
  Status last = Status::Ok();
  for (int i = 0; i < 50 && last.ok(); ++i) {
    auto s = (*client)->TxBurst({&t, 1});
    if (!s.ok()) {
      last = s.status();
      break;
    }
    std::array<uint8_t, 64> buf;
    Packet pk{buf.data(), 64, 0, 0, nullptr};
    (void)(*client)->WaitRx(10ms);
    auto r = (*client)->RxBurst({&pk, 1});
    if (!r.ok()) last = r.status();
  }
  EXPECT_EQ(last.code(), StatusCode::kUnavailable) << last.ToString();
}

TEST(UdpPort, BadAddressIsInvalidArgument) {
  UdpPortConfig c;
  c.bind_ip = "not an address!";
  auto p = OpenUdpPort(c);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
}

TEST(UdpPort, ReusePortGroupIsSteeredByAPayloadField) {
  UdpPortConfig s;
  s.bind_ip = "127.0.0.1";
  s.reuse_port = true;
  auto a = OpenUdpPort(s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  s.bind_port = UdpLocalPort(**a);
  auto b = OpenUdpPort(s);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(SteerByField16(**a, 6, 2).ok());
  UdpPortConfig c;
  c.bind_ip = "127.0.0.1";
  c.peer_ip = "127.0.0.1";
  c.peer_port = s.bind_port;
  c.gso_gro = false;
  // Several client sockets (several flows), each sending ids 0..19 at bytes 6-7.
  std::vector<std::vector<uint8_t>> data;
  for (uint16_t id = 0; id < 20; ++id) {
    std::vector<uint8_t> d(22, 0);
    d[6] = static_cast<uint8_t>(id >> 8);
    d[7] = static_cast<uint8_t>(id);
    data.push_back(d);
  }
  for (int flow = 0; flow < 3; ++flow) {
    auto cl = OpenUdpPort(c);
    ASSERT_TRUE(cl.ok());
    for (auto& d : data) {
      TxPacket t{d.data(), 22, nullptr};
      ASSERT_TRUE((*cl)->TxBurst({&t, 1}).ok());
    }
  }
  auto ga = RecvAll(**a, 30, 32);
  auto gb = RecvAll(**b, 30, 32);
  ASSERT_EQ(ga.size(), 30u);
  ASSERT_EQ(gb.size(), 30u);
  for (auto& d : ga) EXPECT_EQ(d[7] % 2, 0) << "id " << int(d[7]) << " on socket 0";
  for (auto& d : gb) EXPECT_EQ(d[7] % 2, 1) << "id " << int(d[7]) << " on socket 1";
  EXPECT_FALSE(SteerByField16(**a, 6, 0).ok());
}

}  // namespace
}  // namespace ina::net
