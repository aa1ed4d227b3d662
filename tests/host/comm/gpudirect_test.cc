// GPUDirect RDMA's send path without an RDMA device (docs/gpu.md, "GPUDirect RDMA"): the
// communicator over a transport that takes packets with a body (TxMessage::body), as the verbs
// transport does with a gather list. GatherTransport wraps a real UDP transport to the in-process
// fabric (test_fabric.h: the real control plane and ina::dp_ref) and does what a NIC does with
// the gather list: it checks the body lies in a region registered with RegisterTxBody and sends
// header, body and trailer as one datagram. The domain is HostDomain, whose NIC buffers are heap
// memory (kHeap), absent (kNone) or a memfd that this "NIC" refuses as a dma-buf (kMemfd), as
// rxe refuses every dma-buf. Every result is compared bit for bit with the plain host-memory call
// on the same values (the CPU path is the oracle), under loss. The real gather list on soft-RoCE
// runs in the VM (tests/vm/guest/40_switch_roce.sh). Seeds: INA_SEED replays a run.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "comm_util.h"
#include "communicator_factory.h"
#include "expected.h"
#include "gather_transport.h"
#include "ina/host/communicator.h"
#include "ina/host/memory_domain.h"
#include "ina/host/quant.h"
#include "ina/host/transport.h"
#include "support/seed.h"
#include "test_fabric.h"

namespace ina::host {
namespace {

using testing::AllCreated;
using testing::CreateGathering;
using testing::GatherLog;
using testing::ParallelFor;
using testing::TestFabric;
using testutil::RandomFloats;
using testutil::SameBits;

uint64_t Seed() {
  static const uint64_t seed = ina::tests::Seed();
  return seed;
}

// A job of `world` ranks over GatherTransports to a fabric dropping `drop` of the packets.
struct GatherJob {
  std::unique_ptr<TestFabric> fabric;
  std::unique_ptr<GatherLog> log = std::make_unique<GatherLog>();
  std::vector<std::unique_ptr<MemoryDomain>> domains;  // the test's: outlive the communicators
  std::vector<std::unique_ptr<Communicator>> comms;
};
GatherJob StartGatherJob(uint64_t salt, double drop, uint16_t job, uint16_t world, uint16_t window,
                         int lanes = 1) {
  GatherJob j;
  j.fabric = testing::StartFabric(Seed() * 31 + salt, drop);
  if (j.fabric == nullptr) return j;
  CommConfig base = testing::FabricConfig(*j.fabric, job, world, 64, window);
  base.progress_threads = lanes;
  base.rto_initial_us = 20000;
  j.comms = CreateGathering(base, j.log.get());
  return j;
}

std::unique_ptr<MemoryDomain> Host(HostNicMemory nic) {
  HostDomainOptions o;
  o.chunk_bytes = 64 << 10;
  o.nic_memory = nic;
  auto d = MakeHostDomain(o);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : nullptr;
}

// Each size: every rank's float tensor through its domain, then the same values through the plain
// host call; the two must agree bit for bit on every rank (and so with each other).
void RunSizes(std::vector<std::unique_ptr<Communicator>>& comms,
              std::vector<std::unique_ptr<MemoryDomain>>& domains, const std::vector<size_t>& sizes,
              uint64_t salt) {
  const int world = static_cast<int>(comms.size());
  const int k = comms[0]->config().k;
  for (size_t n : sizes) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::mt19937_64 g(Seed() * 7919 + salt + n);
    std::vector<std::vector<float>> dev(world), host(world);
    for (int r = 0; r < world; ++r) {
      dev[r] = RandomFloats(g, n, k);
      if (n > 3) dev[r][n / 2] = r == 1 ? std::numeric_limits<float>::infinity() : dev[r][n / 2];
      host[r] = dev[r];
    }
    std::vector<Status> sd(world), sh(world);
    ParallelFor(world, [&](int r) { sd[r] = comms[r]->AllReduce(dev[r], *domains[r]); });
    ParallelFor(world, [&](int r) { sh[r] = comms[r]->AllReduce(std::span<float>(host[r])); });
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(sd[r].ok()) << "rank " << r << ": " << sd[r].ToString();
      ASSERT_TRUE(sh[r].ok()) << "rank " << r << ": " << sh[r].ToString();
      EXPECT_TRUE(SameBits(dev[r], host[r])) << "rank " << r;
      EXPECT_TRUE(SameBits(dev[r], dev[0])) << "rank " << r << " vs rank 0";
    }
  }
}

// Heap NIC buffers: every block's payload leaves from the NIC buffer (the gather list), sealed by
// combining CRCs, under 3 % loss both ways, with one and with two lanes; a larger call replaces
// the buffer between ops (unregistered, then a new one registered).
TEST(GpuDirect, PayloadsFromTheNicBufferGiveTheHostPathsResultsUnderLoss) {
  for (int lanes : {1, 2}) {
    SCOPED_TRACE("lanes=" + std::to_string(lanes));
    GatherJob j = StartGatherJob(5 + lanes, 0.03, 21, 3, 16, lanes);
    auto& comms = j.comms;
    const GatherLog& log = *j.log;
    ASSERT_TRUE(j.fabric != nullptr && AllCreated(comms));
    auto& domains = j.domains;
    for (int r = 0; r < 3; ++r) domains.push_back(Host(HostNicMemory::kHeap));
    RunSizes(comms, domains, {1, 64 * 16 * 3 + 17, 64 * 16 * 40 + 3}, 1);
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(comms[r]->device_send_path(), "gpudirect") << "rank " << r;
      const CommStats s = comms[r]->stats();
      EXPECT_GT(s.packets_from_device, 0u) << "rank " << r;
      EXPECT_LT(s.packets_from_device, s.packets_sent) << "rank " << r;  // the plain calls too
    }
    EXPECT_GT(log.gathered.load(), 0u);
    // Two growths per rank and lane (the first call allocates, the 2nd and 3rd grow it).
    EXPECT_EQ(log.registered.load(), 3u * 3 * lanes);
    EXPECT_EQ(log.unregistered.load(), 2u * 3 * lanes);
    EXPECT_GT(j.fabric->dropped(), 0u) << "no loss was injected";
  }
}

// Reserved up front (ReserveStaging: NCCL's regMr does this), the NIC buffer is allocated in the
// caller's thread, registered at the first call and never replaced: no allocation, free or
// re-registration while a framework's kernels may be waiting for an op.
TEST(GpuDirect, AReservedNicBufferIsRegisteredOnceAndNeverReplaced) {
  GatherJob j = StartGatherJob(17, 0.01, 24, 2, 16);
  auto& comms = j.comms;
  const GatherLog& log = *j.log;
  ASSERT_TRUE(j.fabric != nullptr && AllCreated(comms));
  auto& domains = j.domains;
  const size_t largest = 64 * 16 * 20 + 5;
  for (int r = 0; r < 2; ++r) {
    domains.push_back(Host(HostNicMemory::kHeap));
    ASSERT_TRUE(comms[r]->ReserveStaging(*domains[r], 4 * largest).ok());
  }
  EXPECT_EQ(log.registered.load(), 0u) << "registration is the progress thread's, at a call";
  RunSizes(comms, domains, {64 * 3, largest, 64 * 16 * 7}, 3);
  EXPECT_EQ(log.registered.load(), 2u);
  EXPECT_EQ(log.unregistered.load(), 0u);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(comms[r]->device_send_path(), "gpudirect");
}

// No NIC buffer (kNone) on rank 0, or a dma-buf the NIC refuses (kMemfd) on rank 1: those ranks
// stage through host memory for good, say why, and their packets are bit-identical to the
// others', so the job's results are the host path's.
TEST(GpuDirect, RanksThatCannotFallBackToHostStagingAndSayWhy) {
  GatherJob j = StartGatherJob(9, 0.02, 22, 3, 8);
  auto& comms = j.comms;
  const GatherLog& log = *j.log;
  ASSERT_TRUE(j.fabric != nullptr && AllCreated(comms));
  auto& domains = j.domains;
  domains.push_back(Host(HostNicMemory::kNone));
  domains.push_back(Host(HostNicMemory::kMemfd));
  domains.push_back(Host(HostNicMemory::kHeap));
  RunSizes(comms, domains, {64 * 8 * 5 + 1, 64 * 8 * 9}, 2);
  const std::string p0 = comms[0]->device_send_path(), p1 = comms[1]->device_send_path();
  EXPECT_EQ(p0.rfind("host staging: ", 0), 0u) << p0;
  EXPECT_NE(p0.find("no NIC buffers"), std::string::npos) << p0;
  EXPECT_EQ(p1.rfind("host staging: ", 0), 0u) << p1;
  EXPECT_NE(p1.find("takes no dma-buf"), std::string::npos) << p1;
  EXPECT_EQ(comms[2]->device_send_path(), "gpudirect");
  EXPECT_EQ(comms[0]->stats().packets_from_device, 0u);
  EXPECT_EQ(comms[1]->stats().packets_from_device, 0u);
  EXPECT_GT(comms[2]->stats().packets_from_device, 0u);
  EXPECT_EQ(log.refused.load(), 1u) << "a refused rank tries once, not on every call";
}

// int32 tensors in the domain are byte-swapped copies, never quantized: no NIC buffer, no path.
TEST(GpuDirect, Int32CallsKeepTheCopyingPath) {
  GatherJob j = StartGatherJob(13, 0, 23, 2, 8);
  auto& comms = j.comms;
  const GatherLog& log = *j.log;
  ASSERT_TRUE(j.fabric != nullptr && AllCreated(comms));
  auto& domains = j.domains;
  for (int r = 0; r < 2; ++r) domains.push_back(Host(HostNicMemory::kHeap));
  std::vector<std::vector<int32_t>> x(2, std::vector<int32_t>(1000));
  for (int r = 0; r < 2; ++r) {
    for (size_t j = 0; j < x[r].size(); ++j) x[r][j] = static_cast<int32_t>(j * 7 + r);
  }
  std::vector<Status> st(2);
  ParallelFor(2, [&](int r) { st[r] = comms[r]->AllReduce(x[r], *domains[r]); });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r].ToString();
    for (size_t j = 0; j < x[r].size(); ++j) ASSERT_EQ(x[r][j], static_cast<int32_t>(j * 14 + 1));
    EXPECT_EQ(comms[r]->device_send_path(), "");
    EXPECT_EQ(comms[r]->stats().packets_from_device, 0u);
  }
  EXPECT_EQ(log.gathered.load(), 0u);
}

}  // namespace
}  // namespace ina::host
