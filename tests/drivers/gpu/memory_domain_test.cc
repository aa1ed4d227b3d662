// The CUDA memory domain's behaviour without a device (label unit; built with a CUDA compiler):
// its argument checks and that it fails cleanly, naming why, where there is no driver or GPU.
// With a GPU, only what does not depend on the device count is checked here.
#include "ina/gpu/memory_domain.h"

#include <gtest/gtest.h>

#include "ina/gpu/device.h"

namespace ina::gpu {
namespace {

TEST(GpuDomainTest, ArgumentsAndNoDevice) {
  CudaDomainOptions bad;
  bad.chunk_bytes = 1;
  EXPECT_EQ(MakeCudaDomain(bad).status().code(), StatusCode::kInvalidArgument);
  const Result<int> count = DeviceCount();
  if (!count.ok()) {
    const auto d = MakeCudaDomain();
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kUnavailable) << d.status().ToString();
    EXPECT_NE(d.status().ToString().find("cuda"), std::string::npos) << d.status().ToString();
    std::printf("no device, as expected here: %s\n", d.status().ToString().c_str());
    return;
  }
  CudaDomainOptions out_of_range;
  out_of_range.device = *count;
  EXPECT_EQ(MakeCudaDomain(out_of_range).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ina::gpu
