// The verbs transport on a real RDMA device (soft-RoCE rxe in the VM harness, label hw): ina
// messages go out as UD SENDs to roce_reflector (tests/host/transport/verbs/roce_reflector.cc) in
// netns sw, which checks BTH/DETH/ICRC/ina header and answers each with its elements + 1.
// Skipped without INA_VERBS_DEVICE (the host: no RDMA kernel). tests/vm/guest/30_verbs_transport.sh
// runs it with INA_VERBS_DEVICE, INA_VERBS_FABRIC (the reflector's IPv4), INA_VERBS_QPN/QKEY and
// INA_VERBS_EXPECT=replies|none (none: the reflector corrupts its replies, which must be dropped).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

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
    proto::DataMsg{.job = 7,
                   .rank = 1,
                   .slot = static_cast<uint16_t>(i),
                   .count = kK,
                   .offset = static_cast<uint32_t>(i) * kK}
        .Encode(p.data());
    std::mt19937 rng(seed + static_cast<uint32_t>(i));
    for (size_t o = kHeaderBytes; o < kBytes - proto::kCrcBytes; o += 4) {
      proto::Store32(p.data() + o, static_cast<uint32_t>(rng()));
    }
    proto::SealMessage(p.data(), kBytes - proto::kCrcBytes);
    return p;
  }

  // Sends all packets (first half from a registered buffer: zero copy; second half bounced).
  // With `gather` (GPUDirect RDMA's packets, TxMessage::body): header and trailer there, the
  // payload from a body region registered with RegisterTxBody, one gather list per packet.
  void SendAll(uint32_t seed, bool gather = false) {
    tx_.assign(kPackets * kBytes, 0);
    ASSERT_TRUE(t_->RegisterTxMemory(tx_.data(), tx_.size() / 2).ok());
    constexpr size_t kBody = kBytes - kHeaderBytes - proto::kCrcBytes;
    if (gather) {
      body_.assign(kPackets * kBody, 0);
      ASSERT_TRUE(t_->RegisterTxBody(body_.data(), body_.size(), -1, 0).ok());
    }
    std::vector<TxMessage> pk;
    for (int i = 0; i < kPackets; ++i) {
      const auto p = Packet(i, seed);
      uint8_t* at = tx_.data() + i * kBytes;
      if (!gather) {
        std::copy(p.begin(), p.end(), at);
        pk.push_back({at, kBytes});
        continue;
      }
      uint8_t* body = body_.data() + i * kBody;
      std::copy(p.begin(), p.begin() + kHeaderBytes, at);
      std::copy(p.begin() + kHeaderBytes, p.end() - proto::kCrcBytes, body);
      std::copy(p.end() - proto::kCrcBytes, p.end(), at + kHeaderBytes);
      pk.push_back({at, kHeaderBytes + proto::kCrcBytes, true, body, kBody, kHeaderBytes});
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

  // Receives the reflector's replies to SendAll(seed): each once, intact, elements + 1. Returns
  // how many came back.
  int CheckReplies(uint32_t seed) {
    std::vector<bool> seen(kPackets, false);
    std::vector<uint8_t> buf(8 * 4096);
    int got = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got < kPackets && std::chrono::steady_clock::now() < deadline) {
      RxMessage rx[8];
      for (int j = 0; j < 8; ++j) rx[j] = {buf.data() + j * 4096, 4096, 0};
      auto n = t_->RecvBurst(rx, std::chrono::milliseconds(200));
      EXPECT_TRUE(n.ok()) << n.status().message();
      if (!n.ok()) return got;
      for (size_t j = 0; j < *n; ++j) {
        EXPECT_EQ(rx[j].len, kBytes);
        if (rx[j].len != kBytes) return got;
        const uint16_t slot = proto::GetSlot(rx[j].data);
        EXPECT_LT(slot, kPackets);
        if (slot >= kPackets) return got;
        EXPECT_FALSE(seen[slot]) << "duplicate reply for slot " << slot;
        seen[slot] = true;
        const auto want = Packet(slot, seed);
        EXPECT_EQ(0, std::memcmp(rx[j].data, want.data(), kHeaderBytes)) << "header, slot " << slot;
        EXPECT_TRUE(proto::MessageCrcOk({rx[j].data, rx[j].len})) << "trailer, slot " << slot;
        for (size_t o = kHeaderBytes; o < kBytes - proto::kCrcBytes; o += 4) {
          if (proto::Load32(rx[j].data + o) != proto::Load32(want.data() + o) + 1) {
            ADD_FAILURE() << "slot " << slot << " byte " << o;
            return got;
          }
        }
        ++got;
      }
    }
    return got;
  }

  std::unique_ptr<verbs::VerbsTransport> t_;
  std::vector<uint8_t> tx_, body_;
};

TEST_F(VerbsRxe, RepliesComeBackIntact) {
  if (Env("INA_VERBS_EXPECT") == "none") GTEST_SKIP() << "this run expects no replies";
  const uint32_t seed = Env("INA_SEED").empty() ? 1 : std::stoul(Env("INA_SEED"));
  std::printf("seed %u\n", seed);
  const auto t0 = std::chrono::steady_clock::now();
  SendAll(seed);
  const int got = CheckReplies(seed);
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

// GPUDirect RDMA's packets (TxMessage::body): one gather list each, header and trailer from the
// caller's memory (registered or bounced), the payload from a body region (host memory here,
// ibv_reg_mr; a GPU's through ibv_reg_dmabuf_mr). The reflector, which checks the ICRC and the
// ina trailer, must see whole messages, and answer each.
TEST_F(VerbsRxe, GatherListsFromABodyRegionArriveAsWholeMessages) {
  if (Env("INA_VERBS_EXPECT") == "none") GTEST_SKIP() << "this run expects no replies";
  SendAll(77, /*gather=*/true);
  const int got = CheckReplies(77);
  const auto c = t_->counters();
  std::printf("gather: replies %d/%d; tx gather %lu (zero-copy %lu, bounced %lu)\n", got, kPackets,
              c.tx_gather, c.tx_zero_copy, c.tx_bounced);
  EXPECT_EQ(got, kPackets);
  EXPECT_EQ(c.tx_gather, static_cast<uint64_t>(kPackets));
  EXPECT_EQ(c.wc_errors, 0u);
  // A body outside every registered region is refused, not sent from wherever it points.
  std::vector<uint8_t> stray(64), hdr(kHeaderBytes + proto::kCrcBytes);
  TxMessage p{hdr.data(), hdr.size(), true, stray.data(), stray.size(), kHeaderBytes};
  auto n = t_->SendBurst(std::span(&p, 1));
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("RegisterTxBody"), std::string::npos) << n.status().message();
  EXPECT_TRUE(t_->UnregisterTxBody(body_.data()).ok());
}

// What the communicator's fallback sees on a provider without dma-buf support (rxe): a descriptor
// that is not a GPU's dma-buf (a memfd) is refused, naming the call and the device.
TEST_F(VerbsRxe, ADmabufTheProviderCannotTakeIsRefusedNamingTheCall) {
  const int fd = memfd_create("ina-not-a-dmabuf", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 16), 0);
  std::vector<uint8_t> va(1 << 16);
  const Status s = t_->RegisterTxBody(va.data(), va.size(), fd, 0);
  close(fd);
  std::printf("dma-buf registration: %s\n", s.ToString().c_str());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.message().find("ibv_reg_dmabuf_mr") != std::string::npos ||
              s.message().find("not in this rdma-core") != std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(Env("INA_VERBS_DEVICE")), std::string::npos) << s.message();
}

TEST_F(VerbsRxe, CorruptRepliesAreDropped) {
  if (Env("INA_VERBS_EXPECT") != "none") GTEST_SKIP() << "this run expects replies";
  SendAll(1);
  std::vector<uint8_t> buf(8 * 4096);
  int got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    RxMessage rx[8];
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
  TxMessage p{big.data(), big.size()};
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
