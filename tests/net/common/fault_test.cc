// The fault-injecting wrapper around real UDP ports on loopback: the faults are exactly those of
// the seeded stream (drops, duplicates, corruption), reordering loses nothing, held packets are
// released. Seed: INA_SEED (default 7), printed.
#include "ina/net/fault.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "ina/net/udp.h"

namespace ina::net {
namespace {

using namespace std::chrono_literals;

uint64_t Seed() {
  const char* s = std::getenv("INA_SEED");
  const uint64_t seed = s != nullptr ? std::strtoull(s, nullptr, 10) : 7;
  std::printf("fault_test seed %llu (INA_SEED overrides)\n", static_cast<unsigned long long>(seed));
  return seed;
}

struct Pair {
  std::unique_ptr<Port> server, client;
};

// server: 127.0.0.1 unconnected, wrapped with rx faults; client: connected, with tx faults.
Pair MakePair(const FaultConfig& rx, const FaultConfig& tx) {
  UdpPortConfig s;
  s.bind_ip = "127.0.0.1";
  s.gso_gro = false;
  auto server = OpenUdpPort(s);
  EXPECT_TRUE(server.ok());
  UdpPortConfig c;
  c.bind_ip = "127.0.0.1";
  c.peer_ip = "127.0.0.1";
  c.peer_port = UdpLocalPort(**server);
  c.gso_gro = false;
  auto client = OpenUdpPort(c);
  EXPECT_TRUE(client.ok());
  Pair p;
  auto ws = WrapWithFaults(std::move(*server), rx);
  auto wc = WrapWithFaults(std::move(*client), tx);
  EXPECT_TRUE(ws.ok() && wc.ok());
  p.server = std::move(*ws);
  p.client = std::move(*wc);
  return p;
}

std::vector<uint8_t> Payload(uint16_t id) {
  std::vector<uint8_t> v(64);
  for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<uint8_t>(id * 7 + j);
  v[0] = static_cast<uint8_t>(id >> 8);
  v[1] = static_cast<uint8_t>(id);
  return v;
}
uint16_t IdOf(const std::vector<uint8_t>& v) { return static_cast<uint16_t>(v[0] << 8 | v[1]); }

// Receives until nothing arrives for 50 ms (or 3 s in all).
std::vector<std::vector<uint8_t>> Drain(Port& port) {
  std::vector<std::vector<uint8_t>> out;
  std::vector<std::array<uint8_t, 2048>> bufs(64);
  std::vector<Packet> pk(64);
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  auto quiet_since = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline &&
         std::chrono::steady_clock::now() - quiet_since < 50ms) {
    for (size_t i = 0; i < pk.size(); ++i) pk[i] = {bufs[i].data(), 2048, 0, 0, nullptr};
    (void)port.WaitRx(5ms);
    auto n = port.RxBurst(pk);
    EXPECT_TRUE(n.ok());
    if (!n.ok()) break;
    for (size_t i = 0; i < *n; ++i) out.emplace_back(pk[i].data, pk[i].data + pk[i].len);
    if (*n > 0) quiet_since = std::chrono::steady_clock::now();
  }
  return out;
}

// Sends ids [0, n) in bursts of `burst`, receiving in between.
std::vector<std::vector<uint8_t>> SendAndReceive(Pair& p, uint16_t n, size_t burst) {
  std::vector<std::vector<uint8_t>> got;
  for (uint16_t first = 0; first < n; first = static_cast<uint16_t>(first + burst)) {
    std::vector<std::vector<uint8_t>> data;
    std::vector<TxPacket> tx;
    for (uint16_t id = first; id < std::min<size_t>(n, first + burst); ++id) {
      data.push_back(Payload(id));
    }
    for (auto& d : data) tx.push_back({d.data(), static_cast<uint32_t>(d.size()), nullptr});
    auto s = p.client->TxBurst(tx);
    EXPECT_TRUE(s.ok());
    EXPECT_EQ(*s, tx.size());
    for (auto& d : data) EXPECT_EQ(d, Payload(IdOf(d))) << "the caller's buffer was changed";
    for (auto& g : Drain(*p.server)) got.push_back(std::move(g));
  }
  (void)p.client->TxBurst({});  // what is still held
  for (auto& g : Drain(*p.server)) got.push_back(std::move(g));
  return got;
}

TEST(FaultPort, NothingToInjectIsTheInnerPort) {
  UdpPortConfig s;
  s.bind_ip = "127.0.0.1";
  auto port = OpenUdpPort(s);
  ASSERT_TRUE(port.ok());
  auto w = WrapWithFaults(std::move(*port), FaultConfig{});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->kind(), "udp");
}

TEST(FaultPort, BadRatesAreRefused) {
  UdpPortConfig s;
  s.bind_ip = "127.0.0.1";
  auto port = OpenUdpPort(s);
  ASSERT_TRUE(port.ok());
  FaultConfig f;
  f.drop = 1.5;
  auto w = WrapWithFaults(std::move(*port), f);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
}

TEST(FaultPort, TxDropsAreExactlyThoseOfTheSeededStream) {
  const uint64_t seed = Seed();
  FaultConfig tx;
  tx.drop = 0.3;
  tx.seed = seed;
  Pair p = MakePair({}, tx);
  EXPECT_EQ(p.client->kind(), "fault(udp)");
  constexpr uint16_t kN = 600;
  auto got = SendAndReceive(p, kN, 30);
  FaultInjector ref(0.3, 0, 0, 0, TxFaultSeed(seed));
  std::vector<uint16_t> want;
  for (uint16_t id = 0; id < kN; ++id) {
    if (!ref.Next().drop) want.push_back(id);
  }
  std::vector<uint16_t> ids;
  for (auto& g : got) ids.push_back(IdOf(g));
  EXPECT_EQ(ids, want);
  const PortStats st = p.client->stats();
  EXPECT_EQ(st.inj_tx_drops, kN - want.size());
  EXPECT_EQ(st.tx_packets, want.size());  // the inner port's count
  // Mean 180 drops; the band is many standard deviations (11) wide.
  EXPECT_GT(st.inj_tx_drops, 100u);
  EXPECT_LT(st.inj_tx_drops, 260u);
}

TEST(FaultPort, RxDropsAreExactlyThoseOfTheSeededStream) {
  const uint64_t seed = Seed();
  FaultConfig rx;
  rx.drop = 0.25;
  rx.seed = seed;
  Pair p = MakePair(rx, {});
  constexpr uint16_t kN = 400;
  auto got = SendAndReceive(p, kN, 25);
  FaultInjector ref(0.25, 0, 0, 0, seed);
  std::vector<uint16_t> want;
  for (uint16_t id = 0; id < kN; ++id) {
    if (!ref.Next().drop) want.push_back(id);
  }
  std::vector<uint16_t> ids;
  for (auto& g : got) ids.push_back(IdOf(g));
  EXPECT_EQ(ids, want);
  EXPECT_EQ(p.server->stats().inj_rx_drops, kN - want.size());
  EXPECT_EQ(p.server->stats().rx_packets, kN);  // the inner port saw them all
}

TEST(FaultPort, DupRateOneDoublesEveryPacketBothWays) {
  FaultConfig f;
  f.dup = 1;
  Pair p = MakePair(f, f);
  constexpr uint16_t kN = 50;
  auto got = SendAndReceive(p, kN, 10);
  ASSERT_EQ(got.size(), 4u * kN);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(IdOf(got[i]), i / 4) << i;
  EXPECT_EQ(p.client->stats().inj_tx_dups, kN);
  EXPECT_EQ(p.server->stats().inj_rx_dups, 2u * kN);
}

TEST(FaultPort, ReorderingLosesNothingAndReorders) {
  const uint64_t seed = Seed();
  FaultConfig f;
  f.reorder = 0.3;
  f.seed = seed;
  Pair p = MakePair(f, f);
  constexpr uint16_t kN = 300;
  auto got = SendAndReceive(p, kN, 20);
  std::vector<int> seen(kN, 0);
  size_t inversions = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LT(IdOf(got[i]), kN);
    ++seen[IdOf(got[i])];
    if (i > 0 && IdOf(got[i]) < IdOf(got[i - 1])) ++inversions;
  }
  for (uint16_t id = 0; id < kN; ++id) EXPECT_EQ(seen[id], 1) << id;
  EXPECT_GT(inversions, 0u);
  EXPECT_GT(p.client->stats().inj_tx_reorders + p.server->stats().inj_rx_reorders, 0u);
  EXPECT_FALSE(p.client->holding());
  EXPECT_FALSE(p.server->holding());
}

TEST(FaultPort, HeldTxPacketsGoOnAnEmptyBurst) {
  FaultConfig f;
  f.reorder = 1;
  Pair p = MakePair({}, f);
  std::vector<std::vector<uint8_t>> data;
  std::vector<TxPacket> tx;
  for (uint16_t id = 0; id < 5; ++id) data.push_back(Payload(id));
  for (auto& d : data) tx.push_back({d.data(), static_cast<uint32_t>(d.size()), nullptr});
  ASSERT_TRUE(p.client->TxBurst(tx).ok());
  EXPECT_TRUE(p.client->holding());
  EXPECT_TRUE(Drain(*p.server).empty());
  ASSERT_TRUE(p.client->TxBurst({}).ok());
  EXPECT_FALSE(p.client->holding());
  auto got = Drain(*p.server);
  ASSERT_EQ(got.size(), 5u);
  for (uint16_t id = 0; id < 5; ++id) EXPECT_EQ(IdOf(got[id]), id);
  EXPECT_EQ(p.client->stats().inj_tx_reorders, 5u);
}

TEST(FaultPort, CorruptionFlipsExactlyOneByteAndLeavesTheSenderAlone) {
  FaultConfig f;
  f.corrupt = 1;
  f.seed = Seed();
  for (bool rx_side : {false, true}) {
    Pair p = rx_side ? MakePair(f, {}) : MakePair({}, f);
    constexpr uint16_t kN = 40;
    // The id bytes may be hit too, so match by position in the stream (no loss, no reorder).
    auto got = SendAndReceive(p, kN, 8);
    ASSERT_EQ(got.size(), kN);
    for (uint16_t id = 0; id < kN; ++id) {
      const auto want = Payload(id);
      ASSERT_EQ(got[id].size(), want.size());
      int diff = 0;
      for (size_t j = 0; j < want.size(); ++j) diff += got[id][j] != want[j];
      EXPECT_EQ(diff, 1) << (rx_side ? "rx " : "tx ") << id;
    }
    const PortStats st = rx_side ? p.server->stats() : p.client->stats();
    EXPECT_EQ(rx_side ? st.inj_rx_corrupts : st.inj_tx_corrupts, kN);
  }
}

}  // namespace
}  // namespace ina::net
