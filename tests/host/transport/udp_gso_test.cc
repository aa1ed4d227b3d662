// UDP GSO/GRO in the UDP transport, against plain local sockets on 127.0.0.1 (ephemeral ports).
// Packet lengths are random; the seed is printed and INA_SEED replays it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ina/host/transport.h"
#include "support/seed.h"

namespace ina::host {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

uint64_t Seed() { return ina::tests::Seed(); }

// A bound UDP socket on 127.0.0.1:0, optionally with UDP_GRO.
class Sock {
 public:
  explicit Sock(bool gro) {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    const int big = 8 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    socklen_t len = sizeof(addr_);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr_), &len);
    if (gro) {
      const int one = 1;
      gro_ = setsockopt(fd_, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
    }
  }
  ~Sock() { close(fd_); }
  uint16_t port() const { return ntohs(addr_.sin_port); }
  bool gro() const { return gro_; }
  // Receives one datagram or GRO train (waits up to 1 s): its bytes and the GRO segment size
  // (0 when none was reported). Returns -1 on timeout.
  int Recv(std::vector<uint8_t>& buf, int* seg, sockaddr_in* from) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) return -1;
    buf.resize(65536);
    iovec iov{buf.data(), buf.size()};
    alignas(cmsghdr) uint8_t ctl[CMSG_SPACE(sizeof(int))];
    msghdr h{};
    h.msg_name = from;
    h.msg_namelen = sizeof(*from);
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctl;
    h.msg_controllen = sizeof(ctl);
    const ssize_t n = recvmsg(fd_, &h, 0);
    *seg = 0;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&h); cm != nullptr; cm = CMSG_NXTHDR(&h, cm)) {
      if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
        std::memcpy(seg, CMSG_DATA(cm), sizeof(int));
      }
    }
    if (n >= 0) buf.resize(static_cast<size_t>(n));
    return static_cast<int>(n);
  }
  // Sends `data` to `to` as one GSO train of `seg`-byte segments (the last may be shorter).
  bool SendTrain(const sockaddr_in& to, const std::vector<uint8_t>& data, uint16_t seg) {
    iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
    alignas(cmsghdr) uint8_t ctl[CMSG_SPACE(sizeof(uint16_t))] = {};
    msghdr h{};
    h.msg_name = const_cast<sockaddr_in*>(&to);
    h.msg_namelen = sizeof(to);
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctl;
    h.msg_controllen = sizeof(ctl);
    cmsghdr* cm = CMSG_FIRSTHDR(&h);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    std::memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
    return sendmsg(fd_, &h, 0) == static_cast<ssize_t>(data.size());
  }

 private:
  int fd_ = -1;
  bool gro_ = false;
  sockaddr_in addr_{};
};

std::unique_ptr<Transport> Open(uint16_t port, bool gso = true) {
  TransportConfig c;
  c.udp_gso = gso;
  c.fabric_host = "127.0.0.1";
  c.fabric_port = port;
  c.bind_host = "127.0.0.1";
  auto t = MakeTransport(c);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<uint8_t> Payload(uint32_t id, size_t len) {
  std::vector<uint8_t> v(len);
  for (size_t j = 0; j < len; ++j) v[j] = static_cast<uint8_t>(id * 131 + j * 7 + (j >> 8));
  return v;
}

// Runs of equal lengths (1046 like a full ina packet, or random), each run sometimes closed by
// a shorter packet: what the sender may coalesce.
std::vector<std::vector<uint8_t>> MakePackets(std::mt19937_64& rng, size_t n) {
  std::vector<std::vector<uint8_t>> out;
  while (out.size() < n) {
    const size_t len = rng() % 2 ? 1046 : 20 + rng() % 1400;
    const size_t run = 1 + rng() % 90;
    for (size_t i = 0; i < run && out.size() < n; ++i) out.push_back(Payload(out.size(), len));
    if (rng() % 3 == 0 && out.size() < n) out.push_back(Payload(out.size(), 1 + rng() % len));
  }
  return out;
}

size_t SendAll(Transport& t, const std::vector<std::vector<uint8_t>>& data) {
  std::vector<TxMessage> tx;
  for (const auto& d : data) tx.push_back({d.data(), d.size()});
  size_t sent = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (sent < tx.size() && Clock::now() < deadline) {
    auto r = t.SendBurst(std::span(tx).subspan(sent));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) break;
    sent += *r;
  }
  return sent;
}

// A plain socket (no GRO) receives every packet as its own datagram, in order, intact.
TEST(UdpGso, SendBurstArrivesAsSeparateDatagramsInOrder) {
  std::mt19937_64 rng(Seed());
  Sock peer(false);
  auto t = Open(peer.port());
  ASSERT_NE(t, nullptr);
  const auto data = MakePackets(rng, 600);
  ASSERT_EQ(SendAll(*t, data), data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    std::vector<uint8_t> buf;
    int seg = 0;
    sockaddr_in from{};
    ASSERT_EQ(peer.Recv(buf, &seg, &from), static_cast<int>(data[i].size())) << "packet " << i;
    EXPECT_EQ(seg, 0);
    EXPECT_EQ(buf, data[i]) << "packet " << i;
  }
}

// A GRO socket sees the trains themselves: with GSO on, runs of equal packets arrive coalesced
// (segment size = the run's length; never more than 64 segments); the concatenation is exact.
// With udp_gso off (CommConfig::udp_gso, INA_UDP_GSO=0), every datagram arrives alone.
void CheckTrains(bool gso_on) {
  std::mt19937_64 rng(Seed());
  Sock peer(true);
  if (!peer.gro()) GTEST_SKIP() << "kernel refuses UDP_GRO";
  auto t = Open(peer.port(), gso_on);
  ASSERT_NE(t, nullptr);
  const auto data = MakePackets(rng, 600);
  std::vector<uint8_t> all;
  for (const auto& d : data) all.insert(all.end(), d.begin(), d.end());
  ASSERT_EQ(SendAll(*t, data), data.size());
  std::vector<uint8_t> got;
  size_t trains = 0;
  size_t i = 0;  // next packet expected
  while (got.size() < all.size()) {
    std::vector<uint8_t> buf;
    int seg = 0;
    sockaddr_in from{};
    const int n = peer.Recv(buf, &seg, &from);
    ASSERT_GT(n, 0) << "after " << got.size() << " of " << all.size() << " bytes";
    // The train splits into packets i, i+1, ... exactly at their lengths.
    const size_t step = seg > 0 ? static_cast<size_t>(seg) : buf.size();
    size_t segs = 0;
    for (size_t off = 0; off < buf.size(); off += step, ++segs) {
      ASSERT_LT(i, data.size());
      EXPECT_EQ(std::min(step, buf.size() - off), data[i].size()) << "packet " << i;
      ++i;
    }
    EXPECT_LE(segs, 64u);
    if (segs > 1) ++trains;
    got.insert(got.end(), buf.begin(), buf.end());
  }
  EXPECT_EQ(got, all);
  EXPECT_EQ(i, data.size());
  if (gso_on) {
    EXPECT_GT(trains, 0u) << "no run was coalesced";
  } else {
    EXPECT_EQ(trains, 0u);
  }
}

TEST(UdpGso, RunsOfEqualPacketsTravelAsTrains) { CheckTrains(true); }
TEST(UdpGso, EnvSwitchTurnsGsoOff) { CheckTrains(false); }

// GRO trains received by the transport are split into consecutive packets; a caller asking for
// fewer packets than a train holds gets the rest on the next calls, nothing lost or reordered.
TEST(UdpGso, GroTrainsSplitAcrossCalls) {
  std::mt19937_64 rng(Seed());
  Sock peer(false);
  auto t = Open(peer.port());
  ASSERT_NE(t, nullptr);
  // Learn the transport's address.
  std::vector<uint8_t> hello = {1, 2, 3};
  TxMessage hi{hello.data(), hello.size()};
  ASSERT_TRUE(t->SendBurst(std::span(&hi, 1)).ok());
  std::vector<uint8_t> buf;
  int seg = 0;
  sockaddr_in addr{};
  ASSERT_EQ(peer.Recv(buf, &seg, &addr), 3);

  // Trains of 2..64 segments with a shorter tail now and then, and single datagrams between.
  std::vector<std::vector<uint8_t>> expect;
  for (int k = 0; k < 12; ++k) {
    const uint16_t s = static_cast<uint16_t>(k % 3 == 0 ? 1046 : 64 + rng() % 900);
    const size_t segs = 2 + rng() % std::min<size_t>(63, 65507 / s - 1);
    std::vector<uint8_t> train;
    for (size_t j = 0; j < segs; ++j) {
      const size_t len = (j + 1 == segs && rng() % 2) ? 1 + rng() % s : s;
      expect.push_back(Payload(expect.size(), len));
      train.insert(train.end(), expect.back().begin(), expect.back().end());
    }
    ASSERT_TRUE(peer.SendTrain(addr, train, s));
    expect.push_back(Payload(expect.size(), 10 + rng() % 100));
    ASSERT_TRUE(peer.SendTrain(addr, expect.back(), 2000));  // one segment: a plain datagram
  }
  std::vector<std::vector<uint8_t>> bufs(32, std::vector<uint8_t>(2048));
  std::vector<RxMessage> rx(32);
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (got < expect.size() && Clock::now() < deadline) {
    const size_t want = 1 + rng() % 32;  // often fewer than a train holds
    for (size_t i = 0; i < want; ++i) rx[i] = {bufs[i].data(), bufs[i].size(), 0};
    auto r = t->RecvBurst(std::span(rx.data(), want), milliseconds(100));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_LE(*r, want);
    for (size_t i = 0; i < *r; ++i, ++got) {
      ASSERT_LT(got, expect.size());
      std::vector<uint8_t> v(rx[i].data, rx[i].data + rx[i].len);
      EXPECT_EQ(v, expect[got]) << "packet " << got;
    }
  }
  EXPECT_EQ(got, expect.size());
  // Nothing more is pending.
  rx[0] = {bufs[0].data(), bufs[0].size(), 0};
  auto r = t->RecvBurst(std::span(rx.data(), 1), milliseconds(0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0u);
}

// A segment larger than the caller's buffer comes back with len 0, and the train goes on.
TEST(UdpGso, OversizedSegmentHasLengthZero) {
  Sock peer(false);
  auto t = Open(peer.port());
  ASSERT_NE(t, nullptr);
  std::vector<uint8_t> hello = {1};
  TxMessage hi{hello.data(), hello.size()};
  ASSERT_TRUE(t->SendBurst(std::span(&hi, 1)).ok());
  std::vector<uint8_t> buf;
  int seg = 0;
  sockaddr_in addr{};
  ASSERT_EQ(peer.Recv(buf, &seg, &addr), 1);
  std::vector<uint8_t> train = Payload(0, 3 * 600 + 100);
  ASSERT_TRUE(peer.SendTrain(addr, train, 600));
  std::vector<uint8_t> small(200);
  std::vector<RxMessage> rx(4);
  size_t got = 0;
  std::vector<size_t> lens;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (got < 4 && Clock::now() < deadline) {
    for (auto& p : rx) p = {small.data(), small.size(), 0};
    auto r = t->RecvBurst(std::span(rx.data(), 4 - got), milliseconds(100));
    ASSERT_TRUE(r.ok());
    for (size_t i = 0; i < *r; ++i) lens.push_back(rx[i].len);
    got += *r;
  }
  EXPECT_EQ(lens, (std::vector<size_t>{0, 0, 0, 100}));
}

}  // namespace
}  // namespace ina::host
