// AllocateJobId (ina/host/job_alloc.h) against the real ina-switchd on loopback.
#include "ina/host/job_alloc.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "ina/host/communicator.h"
#include "support/switchd_process.h"

namespace ina::host {
namespace {

// A loopback UDP port nobody listens on (bound, read back, closed).
uint16_t UnusedUdpPort() {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    ADD_FAILURE() << "no loopback UDP port";
  }
  close(fd);
  return ntohs(sa.sin_port);
}

CommConfig ConfigFor(uint16_t port) {
  CommConfig c;
  c.switch_port = port;
  c.join_timeout_ms = 3000;
  return c;
}

TEST(JobAlloc, IdsAreDistinctInTheAllocRangeAndJoinable) {
  test::SwitchProcess sw({"--port", "0"});
  ASSERT_NE(sw.port(), 0);
  std::set<uint16_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = AllocateJobId(ConfigFor(sw.port()));
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_GE(*id, proto::kAllocJobMin);
    ids.insert(*id);
  }
  EXPECT_EQ(ids.size(), 5u);
  // A communicator on an allocated id works like any other.
  CommConfig c = ConfigFor(sw.port());
  c.job_id = *ids.begin();
  auto comm = Communicator::Create(c);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  std::vector<int32_t> v = {1, -2, 3};
  ASSERT_TRUE((*comm)->AllReduce(std::span(v)).ok());
  EXPECT_EQ(v, (std::vector<int32_t>{1, -2, 3}));
  comm->reset();
  const auto counters = sw.Stop();
  EXPECT_EQ(counters.at("allocs"), 5u);
  EXPECT_EQ(counters.at("alloc_acks"), 5u);
}

// With several cores each core hands out only ids it owns (packets reach core job % cores), so
// every allocated id joins and all-reduces whichever core the request reached.
TEST(JobAlloc, IdsFromAMultiCoreSwitchWorkOnEveryCore) {
  test::SwitchProcess sw({"--port", "0", "--cores", "2"});
  ASSERT_NE(sw.port(), 0);
  // A job in the allocation range, chosen by hand, on core 1: no core may hand its id out.
  CommConfig taken = ConfigFor(sw.port());
  taken.job_id = proto::kAllocJobMin + 1;
  auto holder = Communicator::Create(taken);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  for (int i = 0; i < 6; ++i) {
    auto id = AllocateJobId(ConfigFor(sw.port()));
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_NE(*id, taken.job_id);
    CommConfig c = ConfigFor(sw.port());
    c.job_id = *id;
    auto comm = Communicator::Create(c);
    ASSERT_TRUE(comm.ok()) << "job " << *id << ": " << comm.status().ToString();
    std::vector<int32_t> v = {i, -i};
    ASSERT_TRUE((*comm)->AllReduce(std::span(v)).ok());
    EXPECT_EQ(v, (std::vector<int32_t>{i, -i}));
  }
}

TEST(JobAlloc, NoSwitchIsDeadlineExceededWithinTheTimeout) {
  CommConfig c = ConfigFor(UnusedUdpPort());
  c.join_timeout_ms = 500;
  const auto t0 = std::chrono::steady_clock::now();
  auto id = AllocateJobId(c);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kDeadlineExceeded) << id.status().ToString();
  EXPECT_NE(id.status().message().find("is the switch running?"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(3));  // bounded (500 ms asked; generous for a loaded box)
}

TEST(JobAlloc, BadConfigIsInvalidArgument) {
  CommConfig c;
  c.switch_port = 0;
  auto id = AllocateJobId(c);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ina::host
