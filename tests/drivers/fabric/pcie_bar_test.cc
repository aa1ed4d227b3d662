// PCIe BAR backend: only its error paths can run without hardware.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "ina/drv/regs.h"

namespace ina::drv {
namespace {

TEST(PcieBar, MissingResourceFileIsAnError) {
  auto r = MakePcieBarAccess("/sys/bus/pci/devices/none/resource0", 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("resource0"), std::string::npos);
}

TEST(PcieBar, ZeroSizeIsInvalid) {
  auto r = MakePcieBarAccess("/dev/null", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(PcieBar, FileSmallerThanWindowIsInvalid) {
  char path[] = "/tmp/ina_bar_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "abcd", 4), 4);
  close(fd);
  auto r = MakePcieBarAccess(path, 4096);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  // A regular file of the right size maps; out-of-window access is refused.
  auto ok = MakePcieBarAccess(path, 4);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_FALSE((*ok)->Read32(4).ok());
  EXPECT_FALSE((*ok)->Write32(2, 0).ok());
  unlink(path);
}

}  // namespace
}  // namespace ina::drv
