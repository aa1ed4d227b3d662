// Job table programming over a register window that behaves as plain memory: the PCIe BAR backend
// mapping a 4 KiB regular file (what a card's BAR would be, minus the device). Checks the exact
// register values against the map in proto/ina.toml, written out here as numbers (a known-answer
// test of the generated field accessors), the argument checks, and counter reads. The behaviour of
// the fabric behind the registers is tested against the RTL in tests/rtl/core (label sim).
#include "ina/drv/job_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "ina/proto/wire.h"

namespace ina::drv {
namespace {

namespace r = proto::reg;

class JobTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/ina_job_table_XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    path_ = path;
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    close(fd);
    auto regs = MakePcieBarAccess(path_, 4096);
    ASSERT_TRUE(regs.ok()) << regs.status().ToString();
    regs_ = std::move(*regs);
  }
  void TearDown() override {
    regs_.reset();
    if (!path_.empty()) unlink(path_.c_str());
  }
  uint32_t At(uint32_t addr) {
    auto v = regs_->Read32(addr);
    EXPECT_TRUE(v.ok());
    return v.ok() ? *v : 0xDEADBEEF;
  }

  std::string path_;
  std::unique_ptr<RegisterAccess> regs_;
};

TEST_F(JobTableTest, ProgramJobWritesTheDocumentedFields) {
  const dp::JobConfig job{0x1234, 5, 256, 10, 7};
  ASSERT_TRUE(ProgramJob(*regs_, 3, job, 0xBEEF).ok());
  EXPECT_EQ(At(0x010), 3u);                // job_sel
  EXPECT_EQ(At(0x014), 0x80001234u);       // job_id: [31] valid, [15:0] id
  EXPECT_EQ(At(0x018), (7u << 16) | 10u);  // job_slots: [31:16] window, [15:0] base
  EXPECT_EQ(At(0x01C), 0xBEEF0405u);       // job_world: group, K/64 = 4, world 5
  EXPECT_EQ(At(0x020), 1u);                // job_commit: go
  EXPECT_EQ(r::job_world::GetK64(At(r::kJobWorld)), 4u);
  EXPECT_EQ(r::job_slots::GetWindow(At(r::kJobSlots)), 7u);
}

TEST_F(JobTableTest, ClearJobWritesAnInvalidEntry) {
  ASSERT_TRUE(ProgramJob(*regs_, 1, dp::JobConfig{9, 2, 64, 0, 4}, 9).ok());
  ASSERT_TRUE(regs_->Write32(r::kJobCommit, 0).ok());
  ASSERT_TRUE(ClearJob(*regs_, 2).ok());
  EXPECT_EQ(At(r::kJobSel), 2u);
  EXPECT_EQ(r::job_id::GetValid(At(r::kJobId)), 0u);
  EXPECT_EQ(At(r::kJobCommit), 1u);
}

TEST_F(JobTableTest, ValuesThatDoNotFitAreRefused) {
  // K not a multiple of 64, K 0, a slot base past job_slots.base, a world size past 255.
  for (const dp::JobConfig& bad :
       {dp::JobConfig{1, 2, 100, 0, 4}, dp::JobConfig{1, 2, 0, 0, 4},
        dp::JobConfig{1, 2, 64, 0x10000, 4}, dp::JobConfig{1, 256, 64, 0, 4}}) {
    const Status s = ProgramJob(*regs_, 0, bad, 1);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  }
  EXPECT_EQ(At(r::kJobCommit), 0u) << "nothing committed";
}

TEST_F(JobTableTest, KeyedJobsWriteTheModeAndTheKeys) {
  dp::JobConfig job{0x1234, 5, 256, 10, 7};
  job.security.mode = proto::SecMode::kMac;
  for (int i = 0; i < 16; ++i) {
    job.security.up[i] = static_cast<uint8_t>(0x10 + i);
    job.security.down[i] = static_cast<uint8_t>(0xA0 + i);
  }
  ASSERT_TRUE(ProgramJob(*regs_, 3, job, 0xBEEF).ok());
  EXPECT_EQ(At(0x040), 1u);           // job_sec: mode mac
  EXPECT_EQ(At(0x044), 0x10111213u);  // job_key_up0: byte 0 in [31:24]
  EXPECT_EQ(At(0x050), 0x1C1D1E1Fu);  // job_key_up3
  EXPECT_EQ(At(0x054), 0xA0A1A2A3u);  // job_key_down0
  EXPECT_EQ(At(0x060), 0xACADAEAFu);  // job_key_down3
  EXPECT_EQ(At(0x020), 1u);           // committed
  // A CRC-only job after it: mode 0 again.
  ASSERT_TRUE(ProgramJob(*regs_, 3, dp::JobConfig{9, 2, 64, 0, 4}, 9).ok());
  EXPECT_EQ(At(0x040), 0u);
}

TEST_F(JobTableTest, MacEncryptWritesItsModeAndKeysAndNoModeIsRefused) {
  dp::JobConfig job{1, 2, 64, 0, 4};
  job.security.mode = proto::SecMode::kMacEncrypt;
  for (int i = 0; i < 16; ++i) {
    job.security.up[i] = static_cast<uint8_t>(0x30 + i);
    job.security.down[i] = static_cast<uint8_t>(0xC0 + i);
  }
  ASSERT_TRUE(ProgramJob(*regs_, 0, job, 1).ok());
  EXPECT_EQ(At(0x040), 2u);           // job_sec: mode mac_encrypt
  EXPECT_EQ(At(0x044), 0x30313233u);  // job_key_up0
  EXPECT_EQ(At(0x060), 0xCCCDCECFu);  // job_key_down3
  EXPECT_EQ(At(0x020), 1u);           // committed
  ASSERT_TRUE(regs_->Write32(r::kJobCommit, 0).ok());
  // A mode that is none of crc, mac and mac_encrypt: refused, nothing written.
  job.security.mode = static_cast<proto::SecMode>(3);
  const Status s = ProgramJob(*regs_, 1, job, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(At(r::kJobCommit), 0u) << "nothing committed";
  EXPECT_EQ(At(r::kJobSel), 0u) << "nothing written";
}

TEST_F(JobTableTest, ReadCountersReadsEveryCounterInOrder) {
  for (uint32_t i = 0; i < proto::kNumCounters; ++i) {
    ASSERT_TRUE(regs_->Write32(r::kCounterBase + 4 * i, 1000 + i).ok());
  }
  auto c = ReadCounters(*regs_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (uint32_t i = 0; i < proto::kNumCounters; ++i) EXPECT_EQ((*c)[i], 1000u + i) << i;
}

TEST(JobTable, ErrorsOfTheRegisterAccessPassThrough) {
  // A window too small for the counters: the access refuses the address, ReadCounters says so.
  char path[] = "/tmp/ina_job_table_small_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0x100), 0);
  close(fd);
  auto regs = MakePcieBarAccess(path, 0x100);
  ASSERT_TRUE(regs.ok()) << regs.status().ToString();
  EXPECT_FALSE(ReadCounters(**regs).ok());
  unlink(path);
}

}  // namespace
}  // namespace ina::drv
