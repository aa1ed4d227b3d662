// TransportConfig::faults: the worker's transport wrapped in ina::net's FaultPort, against a
// plain net UDP port as the fabric on 127.0.0.1.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <vector>

#include "ina/host/transport.h"
#include "ina/net/udp.h"

namespace ina::host {
namespace {

using namespace std::chrono_literals;

struct Pair {
  std::unique_ptr<net::Port> fabric;
  std::unique_ptr<Transport> worker;
};

Pair Make(const TransportFaults& f) {
  Pair s;
  net::UdpPortConfig pc;
  pc.bind_ip = "127.0.0.1";
  auto fabric = net::OpenUdpPort(pc);
  EXPECT_TRUE(fabric.ok());
  s.fabric = std::move(*fabric);
  TransportConfig tc;
  tc.fabric_host = "127.0.0.1";
  tc.fabric_port = net::UdpLocalPort(*s.fabric);
  tc.bind_host = "127.0.0.1";
  tc.faults = f;
  auto t = MakeTransport(tc);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  s.worker = std::move(*t);
  return s;
}

// What the fabric receives in 200 ms; *from is the last sender.
size_t FabricRecv(net::Port& p, net::Endpoint* from) {
  std::array<std::array<uint8_t, 2048>, 64> bufs;
  std::array<net::Packet, 64> pk;
  std::array<net::Endpoint, 64> ep;
  size_t got = 0;
  const auto until = std::chrono::steady_clock::now() + 200ms;
  while (std::chrono::steady_clock::now() < until) {
    for (size_t i = 0; i < pk.size(); ++i) pk[i] = {bufs[i].data(), 2048, 0, 0, &ep[i]};
    (void)p.WaitRx(10ms);
    auto n = p.RxBurst(pk);
    EXPECT_TRUE(n.ok());
    if (n.ok() && *n > 0) *from = ep[*n - 1];
    got += n.ok() ? *n : 0;
  }
  return got;
}

size_t WorkerRecv(Transport& t) {
  std::array<std::array<uint8_t, 2048>, 64> bufs;
  std::array<RxMessage, 64> pk;
  size_t got = 0;
  const auto until = std::chrono::steady_clock::now() + 200ms;
  while (std::chrono::steady_clock::now() < until) {
    for (size_t i = 0; i < pk.size(); ++i) pk[i] = {bufs[i].data(), 2048, 0};
    auto n = t.RecvBurst(pk, std::chrono::microseconds(10000));
    EXPECT_TRUE(n.ok());
    got += n.ok() ? *n : 0;
  }
  return got;
}

TEST(TransportFaults, DropRateOneSendsNothingButReportsEverySent) {
  TransportFaults f;
  f.drop = 1;
  Pair s = Make(f);
  std::vector<uint8_t> d(100, 1);
  std::vector<TxMessage> tx(10, TxMessage{d.data(), d.size()});
  auto n = s.worker->SendBurst(tx);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, tx.size());
  net::Endpoint from;
  EXPECT_EQ(FabricRecv(*s.fabric, &from), 0u);
}

TEST(TransportFaults, DupRateOneDoublesBothWays) {
  TransportFaults f;
  f.dup = 1;
  Pair s = Make(f);
  std::vector<uint8_t> d(100, 2);
  std::vector<TxMessage> tx(10, TxMessage{d.data(), d.size()});
  auto n = s.worker->SendBurst(tx);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, tx.size());
  net::Endpoint from;
  EXPECT_EQ(FabricRecv(*s.fabric, &from), 20u);
  std::vector<net::TxPacket> back(10, net::TxPacket{d.data(), 100, &from});
  auto b = s.fabric->TxBurst(back);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, back.size());
  EXPECT_EQ(WorkerRecv(*s.worker), 20u);
}

TEST(TransportFaults, BadRateIsInvalidArgument) {
  TransportConfig tc;
  tc.fabric_host = "127.0.0.1";
  tc.fabric_port = 9;
  tc.bind_host = "127.0.0.1";
  tc.faults.reorder = -0.5;
  auto t = MakeTransport(tc);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ina::host
