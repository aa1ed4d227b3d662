// The UDP transport against a plain local UDP socket on 127.0.0.1 (ephemeral ports).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "ina/host/transport.h"

namespace ina::host {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A bound UDP socket on 127.0.0.1:0.
class Peer {
 public:
  Peer() {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    socklen_t len = sizeof(addr_);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr_), &len);
  }
  ~Peer() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  uint16_t port() const { return ntohs(addr_.sin_port); }
  // Receives one datagram (waits up to 1 s); returns its size, -1 on timeout.
  int Recv(std::vector<uint8_t>& buf, sockaddr_in* from) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) return -1;
    socklen_t len = sizeof(*from);
    buf.resize(4096);
    return static_cast<int>(
        recvfrom(fd_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(from), &len));
  }
  void SendTo(const sockaddr_in& to, const std::vector<uint8_t>& data) {
    ASSERT_EQ(sendto(fd_, data.data(), data.size(), 0, reinterpret_cast<const sockaddr*>(&to),
                     sizeof(to)),
              static_cast<ssize_t>(data.size()));
  }

 private:
  int fd_ = -1;
  sockaddr_in addr_{};
};

std::unique_ptr<Transport> Open(uint16_t port) {
  TransportConfig c;
  c.fabric_host = "127.0.0.1";
  c.fabric_port = port;
  c.bind_host = "127.0.0.1";
  auto t = MakeTransport(c);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<uint8_t> Payload(int i, size_t len) {
  std::vector<uint8_t> v(len);
  for (size_t j = 0; j < len; ++j) v[j] = static_cast<uint8_t>(i * 31 + j);
  return v;
}

// Sends one datagram from the transport so the peer learns its address.
sockaddr_in LearnAddress(Transport& t, Peer& peer) {
  std::vector<uint8_t> hello = {1, 2, 3};
  TxMessage tx{hello.data(), hello.size()};
  auto r = t.SendBurst(std::span(&tx, 1));
  EXPECT_TRUE(r.ok() && *r == 1);
  std::vector<uint8_t> buf;
  sockaddr_in from{};
  EXPECT_EQ(peer.Recv(buf, &from), 3);
  return from;
}

TEST(UdpTransport, SendBurstDeliversInOrder) {
  Peer peer;
  auto t = Open(peer.port());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name(), "udp");
  constexpr int kN = 100;  // more than one burst of 32
  std::vector<std::vector<uint8_t>> data;
  std::vector<TxMessage> tx;
  for (int i = 0; i < kN; ++i) data.push_back(Payload(i, 22 + 4 * (i % 50)));
  for (auto& d : data) tx.push_back({d.data(), d.size()});
  size_t sent = 0;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (sent < tx.size() && Clock::now() < deadline) {
    auto r = t->SendBurst(std::span(tx).subspan(sent));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    sent += *r;
  }
  ASSERT_EQ(sent, tx.size());
  for (int i = 0; i < kN; ++i) {
    std::vector<uint8_t> buf;
    sockaddr_in from{};
    int n = peer.Recv(buf, &from);
    ASSERT_EQ(n, static_cast<int>(data[i].size())) << "packet " << i;
    buf.resize(n);
    EXPECT_EQ(buf, data[i]) << "packet " << i;
  }
}

TEST(UdpTransport, RecvBurstReturnsBurstsFromFabric) {
  Peer peer;
  auto t = Open(peer.port());
  ASSERT_NE(t, nullptr);
  sockaddr_in addr = LearnAddress(*t, peer);
  constexpr int kN = 40;
  for (int i = 0; i < kN; ++i) peer.SendTo(addr, Payload(i, 100 + i));
  std::vector<std::vector<uint8_t>> bufs(kN, std::vector<uint8_t>(2048));
  std::vector<RxMessage> rx(kN);
  int got = 0;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (got < kN && Clock::now() < deadline) {
    for (int i = 0; i < kN; ++i) rx[i] = {bufs[i].data(), bufs[i].size(), 0};
    auto r = t->RecvBurst(std::span(rx), milliseconds(100));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_LE(*r, 32u);  // one burst at most
    for (size_t i = 0; i < *r; ++i) {
      std::vector<uint8_t> v(rx[i].data, rx[i].data + rx[i].len);
      EXPECT_EQ(v, Payload(got, 100 + got)) << "packet " << got;
      ++got;
    }
  }
  EXPECT_EQ(got, kN);
}

TEST(UdpTransport, TimeoutReturnsZeroInBoundedTime) {
  Peer peer;
  auto t = Open(peer.port());
  ASSERT_NE(t, nullptr);
  std::vector<uint8_t> buf(2048);
  RxMessage rx{buf.data(), buf.size(), 0};
  auto t0 = Clock::now();
  auto r = t->RecvBurst(std::span(&rx, 1), milliseconds(50));
  auto waited = Clock::now() - t0;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 0u);
  EXPECT_GE(waited, milliseconds(45));
  EXPECT_LT(waited, milliseconds(2000));
  // Zero timeout: a poll.
  t0 = Clock::now();
  r = t->RecvBurst(std::span(&rx, 1), microseconds(0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
  EXPECT_LT(Clock::now() - t0, milliseconds(500));
}

TEST(UdpTransport, DiscardsPacketsFromOtherSources) {
  Peer peer;
  Peer stranger;
  auto t = Open(peer.port());
  ASSERT_NE(t, nullptr);
  sockaddr_in addr = LearnAddress(*t, peer);
  stranger.SendTo(addr, Payload(1, 50));
  peer.SendTo(addr, Payload(2, 60));
  std::vector<uint8_t> buf(2048);
  RxMessage rx{buf.data(), buf.size(), 0};
  auto r = t->RecvBurst(std::span(&rx, 1), milliseconds(500));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(*r, 1u);
  EXPECT_EQ(rx.len, 60u);  // the fabric's packet, not the stranger's
  r = t->RecvBurst(std::span(&rx, 1), milliseconds(50));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
}

TEST(UdpTransport, OversizedDatagramHasLengthZero) {
  Peer peer;
  auto t = Open(peer.port());
  ASSERT_NE(t, nullptr);
  sockaddr_in addr = LearnAddress(*t, peer);
  peer.SendTo(addr, Payload(3, 1500));
  std::vector<uint8_t> buf(100);
  RxMessage rx{buf.data(), buf.size(), 7};
  auto r = t->RecvBurst(std::span(&rx, 1), milliseconds(500));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(*r, 1u);
  EXPECT_EQ(rx.len, 0u);
}

TEST(UdpTransport, ConnectionRefusedIsUnavailable) {
  uint16_t port;
  {
    Peer gone;
    port = gone.port();
  }  // closed: nothing listens on `port` now
  auto t = Open(port);
  ASSERT_NE(t, nullptr);
  std::vector<uint8_t> d = Payload(0, 30);
  TxMessage tx{d.data(), d.size()};
  std::vector<uint8_t> buf(2048);
  RxMessage rx{buf.data(), buf.size(), 0};
  // The ICMP port-unreachable comes back asynchronously; a later send or receive reports it.
  bool saw_unavailable = false;
  for (int i = 0; i < 20 && !saw_unavailable; ++i) {
    auto s = t->SendBurst(std::span(&tx, 1));
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
      saw_unavailable = true;
      break;
    }
    auto r = t->RecvBurst(std::span(&rx, 1), milliseconds(20));
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
      saw_unavailable = true;
    }
  }
  EXPECT_TRUE(saw_unavailable);
}

TEST(UdpTransport, FactoryRejectsBadConfig) {
  TransportConfig c;
  c.kind = "carrier-pigeon";
  auto t = MakeTransport(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  c.kind = "udp";
  c.fabric_host = "no such host.invalid";
  t = MakeTransport(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ina::host
