// The CUDA memory domain's behaviour without a device (label unit; built with a CUDA compiler):
// its argument checks and that it fails cleanly, naming why, where there is no driver or GPU.
// With a GPU, only what does not depend on the device count is checked here.
#include "ina/gpu/memory_domain.h"

#include <gtest/gtest.h>

#include "ina/gpu/device.h"
#include "ina/gpu/dmabuf.h"

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

// Without a driver the dma-buf entry points are missing: a one-line reason, no crash (the library
// never links libcuda). With a device, only that the answer is a clean Status either way.
TEST(GpuDomainTest, DmaBufSupportSaysWhyNot) {
  const Status s = DmaBufSupport(0);
  std::printf("DmaBufSupport(0): %s\n", s.ToString().c_str());
  if (!DeviceCount().ok()) {
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("cuda"), std::string::npos) << s.ToString();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << "one line: " << s.ToString();
    const Result<int> fd = ExportDmaBuf(nullptr, 4096);
    EXPECT_FALSE(fd.ok());
  }
  EXPECT_EQ(ExportDmaBuf(reinterpret_cast<void*>(4096), 100).status().code(),
            DeviceCount().ok() ? StatusCode::kInvalidArgument : DmaBufSupport(0).code());
}

}  // namespace
}  // namespace ina::gpu
