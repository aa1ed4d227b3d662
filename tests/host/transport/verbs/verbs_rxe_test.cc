// The verbs transport on a real RDMA device (soft-RoCE rxe in the VM harness, label hw): ina
// messages go out as UD SENDs to roce_reflector (tests/host/transport/verbs/roce_reflector.cc) in
// netns sw, which checks BTH/DETH/ICRC/ina header and answers each with its elements + 1.
// Skipped without INA_VERBS_DEVICE (the host: no RDMA kernel). tests/vm/guest/30_verbs_transport.sh
// runs it with INA_VERBS_DEVICE, INA_VERBS_FABRIC (the reflector's IPv4), INA_VERBS_QPN/QKEY and
// INA_VERBS_EXPECT=replies|none (none: the reflector corrupts its replies, which must be dropped).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ina/host/transport.h"
#include "ina/proto/crc32c.h"
#include "ina/proto/wire.h"
#include "verbs/verbs_transport.h"

namespace ina::host {
namespace {

using proto::kHeaderBytes;

constexpr int kPackets = 200;
constexpr uint16_t kK = 256;
constexpr size_t kBytes = proto::MessageBytes(kK);

std::string Env(const char* v) { return std::getenv(v) ? std::getenv(v) : ""; }

class VerbsRxe : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Env("INA_VERBS_DEVICE").empty()) {
      GTEST_SKIP() << "INA_VERBS_DEVICE unset: needs an RDMA device (run scripts/vm/run-vm.sh: "
                      "soft-RoCE in a qemu guest)";
    }
    TransportConfig c;
    c.kind = "verbs";
    c.fabric_host = Env("INA_VERBS_FABRIC").empty() ? "10.0.1.2" : Env("INA_VERBS_FABRIC");
    auto t = verbs::OpenVerbsTransport([&] {
      TransportConfig x = c;
      EXPECT_TRUE(ApplyVerbsEnv(&x.verbs).ok());
      return x;
    }());
    ASSERT_TRUE(t.ok()) << t.status().message();
    t_ = std::move(t).value();
    std::printf("verbs transport: qpn 0x%x, mtu %d\n", t_->qp_num(), t_->active_mtu());
  }

  // Packet i: an ina DATA message, slot i, K elements from the seed.
  std::vector<uint8_t> Packet(int i, uint32_t seed) {
    std::vector<uint8_t> p(kBytes);
    proto::Header h;
    h.version = proto::kVersion;
    h.type = static_cast<uint8_t>(proto::MsgType::kData);
    h.job = 7;
    h.rank = 1;
    h.slot = static_cast<uint16_t>(i);
    h.count = kK;
    h.offset = static_cast<uint32_t>(i) * kK;
    proto::EncodeHeader(h, p.data());
    std::mt19937 rng(seed + static_cast<uint32_t>(i));
    for (size_t o = kHeaderBytes; o < kBytes - proto::kCrcBytes; o += 4) {
      proto::Store32(p.data() + o, static_cast<uint32_t>(rng()));
    }
    proto::SealMessage(p.data(), kBytes - proto::kCrcBytes);
    return p;
  }

  // Sends all packets (first half from a registered buffer: zero copy; second half bounced).
  void SendAll(uint32_t seed) {
    tx_.assign(kPackets * kBytes, 0);
    ASSERT_TRUE(t_->RegisterTxMemory(tx_.data(), tx_.size() / 2).ok());
    std::vector<TxPacket> pk;
    for (int i = 0; i < kPackets; ++i) {
      const auto p = Packet(i, seed);
      std::copy(p.begin(), p.end(), tx_.begin() + i * kBytes);
      pk.push_back({tx_.data() + i * kBytes, kBytes});
    }
    size_t done = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (done < pk.size()) {
      auto n = t_->SendBurst(std::span(pk).subspan(done));
      ASSERT_TRUE(n.ok()) << n.status().message();
      done += *n;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "sends stuck at " << done;
    }
  }

  std::unique_ptr<verbs::VerbsTransport> t_;
  std::vector<uint8_t> tx_;
};

TEST_F(VerbsRxe, RepliesComeBackIntact) {
  if (Env("INA_VERBS_EXPECT") == "none") GTEST_SKIP() << "this run expects no replies";
  const uint32_t seed = Env("INA_SEED").empty() ? 1 : std::stoul(Env("INA_SEED"));
  std::printf("seed %u\n", seed);
  const auto t0 = std::chrono::steady_clock::now();
  SendAll(seed);
  std::vector<bool> seen(kPackets, false);
  std::vector<uint8_t> buf(8 * 4096);
  int got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got < kPackets && std::chrono::steady_clock::now() < deadline) {
    RxPacket rx[8];
    for (int j = 0; j < 8; ++j) rx[j] = {buf.data() + j * 4096, 4096, 0};
    auto n = t_->RecvBurst(rx, std::chrono::milliseconds(200));
    ASSERT_TRUE(n.ok()) << n.status().message();
    for (size_t j = 0; j < *n; ++j) {
      ASSERT_EQ(rx[j].len, kBytes);
      const uint16_t slot = proto::GetSlot(rx[j].data);
      ASSERT_LT(slot, kPackets);
      EXPECT_FALSE(seen[slot]) << "duplicate reply for slot " << slot;
      seen[slot] = true;
      const auto want = Packet(slot, seed);
      ASSERT_EQ(0, std::memcmp(rx[j].data, want.data(), kHeaderBytes)) << "header, slot " << slot;
      ASSERT_TRUE(proto::MessageCrcOk({rx[j].data, rx[j].len})) << "trailer, slot " << slot;
      for (size_t o = kHeaderBytes; o < kBytes - proto::kCrcBytes; o += 4) {
        ASSERT_EQ(proto::Load32(rx[j].data + o), proto::Load32(want.data() + o) + 1)
            << "slot " << slot << " byte " << o;
      }
      ++got;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A figure, not a check: this worker's send-to-last-reply rate through the reflector.
  std::printf("WORKER verbs UD %zu-byte messages: %d round trips in %.3f s = %.0f msg/s\n", kBytes,
              got, s, got / s);
  const auto c = t_->counters();
  std::printf("replies %d/%d; tx zero-copy %lu bounced %lu; rx foreign %lu\n", got, kPackets,
              c.tx_zero_copy, c.tx_bounced, c.rx_foreign);
  // UD does not retransmit, but on rxe through one veth nothing is lost.
  EXPECT_EQ(got, kPackets);
  EXPECT_EQ(c.tx_zero_copy, static_cast<uint64_t>(kPackets / 2));
  EXPECT_EQ(c.tx_bounced, static_cast<uint64_t>(kPackets / 2));
  EXPECT_EQ(c.wc_errors, 0u);
}

TEST_F(VerbsRxe, CorruptRepliesAreDropped) {
  if (Env("INA_VERBS_EXPECT") != "none") GTEST_SKIP() << "this run expects replies";
  SendAll(1);
  std::vector<uint8_t> buf(8 * 4096);
  int got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    RxPacket rx[8];
    for (int j = 0; j < 8; ++j) rx[j] = {buf.data() + j * 4096, 4096, 0};
    auto n = t_->RecvBurst(rx, std::chrono::milliseconds(200));
    ASSERT_TRUE(n.ok()) << n.status().message();
    got += static_cast<int>(*n);
  }
  std::printf("replies delivered %d (rx foreign %lu)\n", got, t_->counters().rx_foreign);
  EXPECT_EQ(got, 0);
  EXPECT_EQ(t_->counters().rx_foreign, 0u) << "the device itself must drop them";
}

TEST_F(VerbsRxe, ErrorsNameTheCallAndTheDevice) {
  std::vector<uint8_t> big(static_cast<size_t>(t_->active_mtu()) + 1);
  TxPacket p{big.data(), big.size()};
  auto n = t_->SendBurst(std::span(&p, 1));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(n.status().message().find("MTU"), std::string::npos) << n.status().message();
  // A GID index the port does not have: the verbs call that refuses it is named, with the device.
  TransportConfig c;
  c.kind = "verbs";
  c.fabric_host = Env("INA_VERBS_FABRIC").empty() ? "10.0.1.2" : Env("INA_VERBS_FABRIC");
  ASSERT_TRUE(ApplyVerbsEnv(&c.verbs).ok());
  c.verbs.gid_index = 250;
  auto bad = verbs::OpenVerbsTransport(c);
  ASSERT_FALSE(bad.ok());
  std::printf("gid 250: %s\n", bad.status().message().c_str());
  EXPECT_NE(bad.status().message().find("ibv_"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find(c.verbs.device), std::string::npos);
}

}  // namespace
}  // namespace ina::host
