// The rings between the cores of a DPDK switch (dataplane/src/switchd/handoff.h): order, the full
// ring refusing without writing, entries used in place, and one producer / one consumer thread
// moving 50000 packets with every byte and peer intact. Seeded by the packet index, no clock.
#include "handoff.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace ina::dp::switchd {
namespace {

std::vector<uint8_t> Packet(uint32_t id) {
  std::vector<uint8_t> v(16 + id % 1000);
  for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<uint8_t>(id * 7 + j);
  std::memcpy(v.data(), &id, 4);
  return v;
}

net::Endpoint Peer(uint32_t id) {
  net::Endpoint e = *net::MakeEndpoint("10.0.0.1", static_cast<uint16_t>(id));
  net::SetVia(&e, static_cast<uint16_t>(id % 7));
  return e;
}

TEST(PacketRing, FifoUntilFullThenRefusesWithoutWriting) {
  PacketRing r(4);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(r.Push(Packet(i), Peer(i), i));
  EXPECT_FALSE(r.Push(Packet(9), Peer(9), 9));
  std::vector<uint8_t> too_long(proto::kMaxPacketBytes + 1);
  ASSERT_EQ(r.Ready(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    const auto& e = r.Peek(i);
    const auto want = Packet(i);
    ASSERT_EQ(e.len, want.size());
    EXPECT_EQ(std::memcmp(e.data, want.data(), want.size()), 0);
    EXPECT_EQ(e.flags, i);
    EXPECT_EQ(net::GetVia(e.peer), i % 7);
  }
  r.Pop(3);
  EXPECT_EQ(r.Ready(), 1u);
  EXPECT_FALSE(r.Push(too_long, Peer(1), 0));  // longer than an ina packet: refused
  EXPECT_TRUE(r.Push(Packet(4), Peer(4), 4));
  EXPECT_EQ(r.Ready(), 2u);
  EXPECT_EQ(std::memcmp(r.Peek(0).data, Packet(3).data(), 4), 0);
  EXPECT_EQ(std::memcmp(r.Peek(1).data, Packet(4).data(), 4), 0);
}

TEST(PacketRing, TwoThreadsMoveEveryPacketIntactInOrder) {
  constexpr uint32_t kN = 50000;
  PacketRing r(64);
  std::thread producer([&] {
    for (uint32_t i = 0; i < kN;) {
      if (r.Push(Packet(i), Peer(i), i)) ++i;
    }
  });
  uint32_t next = 0, bad = 0;
  while (next < kN) {
    const size_t n = r.Ready();
    for (size_t i = 0; i < n; ++i) {
      const auto& e = r.Peek(i);
      const auto want = Packet(next);
      if (e.len != want.size() || std::memcmp(e.data, want.data(), want.size()) != 0 ||
          e.flags != next || net::GetVia(e.peer) != next % 7) {
        ++bad;
      }
      ++next;
    }
    r.Pop(n);
  }
  producer.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(r.Ready(), 0u);
}

TEST(Handoff, RingsPerPairAndDirectionSizedToTheBudget) {
  // The largest power of two whose rings (2 per ordered pair of cores) fit the budget.
  auto fits = [](size_t cores, size_t entries) {
    return 2 * cores * (cores - 1) * entries * sizeof(PacketRing::Entry) <= Handoff::kBudgetBytes;
  };
  Handoff two(2);
  EXPECT_TRUE(fits(2, two.entries()));
  EXPECT_FALSE(fits(2, 2 * two.entries()));
  EXPECT_EQ(two.entries(), 1024u);  // 8 KiB entries (K=2048)
  Handoff eight(8);
  EXPECT_EQ(eight.entries(), Handoff::kMinEntries);
  EXPECT_GE(Handoff::kMinEntries, 2 * net::kBurst);
  EXPECT_FALSE(two.Pending(1));
  ASSERT_TRUE(two.rx(0, 1).Push(Packet(1), Peer(1), 0));
  EXPECT_TRUE(two.Pending(1));
  EXPECT_FALSE(two.Pending(0));
  ASSERT_TRUE(two.tx(1, 0).Push(Packet(2), Peer(2), 0));
  EXPECT_TRUE(two.Pending(0));
  EXPECT_EQ(two.rx(1, 0).Ready(), 0u);  // the directions are separate rings
}

}  // namespace
}  // namespace ina::dp::switchd
