// The CUDA domain's NIC buffer ranges (drivers/gpu/src/nic_ranges.h), without a device: inside,
// outside, at the edges, straddling an end or running into a range, several ranges, removal.
#include "nic_ranges.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace ina::gpu::internal {
namespace {

const void* P(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(GpuNicRangesTest, InsideOutsideAndEdges) {
  NicRanges r;
  EXPECT_FALSE(*r.Contains(P(0x1000), 16, "x"));
  r.Add(0x10000, 0x1000);  // [0x10000, 0x11000)
  r.Add(0x20000, 0x2000);  // [0x20000, 0x22000)
  EXPECT_TRUE(*r.Contains(P(0x10000), 0x1000, "x"));
  EXPECT_TRUE(*r.Contains(P(0x10ffc), 4, "x"));
  EXPECT_TRUE(*r.Contains(P(0x10800), 0, "x"));
  EXPECT_TRUE(*r.Contains(P(0x21000), 0x1000, "x"));
  EXPECT_FALSE(*r.Contains(P(0x11000), 0xf000, "x"));  // right after the first, up to the second
  EXPECT_FALSE(*r.Contains(P(0xf000), 0x1000, "x"));   // right before the first
  EXPECT_FALSE(*r.Contains(P(0x22000), 1 << 20, "x"));
  EXPECT_FALSE(*r.Contains(P(0x12000), 0, "x"));
  const auto past = r.Contains(P(0x10ffc), 8, "cuda:0: PayloadCrcs");
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("cuda:0: PayloadCrcs: 8 bytes run past the end"),
            std::string::npos)
      << past.status().ToString();
  EXPECT_EQ(r.Contains(P(0xfffc), 8, "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Contains(P(0x11000), 0xf001, "x").status().code(), StatusCode::kInvalidArgument);
  r.Remove(0x10000);
  EXPECT_FALSE(*r.Contains(P(0x10000), 0x1000, "x"));
  EXPECT_TRUE(*r.Contains(P(0x20000), 0x2000, "x"));
}

}  // namespace
}  // namespace ina::gpu::internal
