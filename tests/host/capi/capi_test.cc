// Runs the C checks in capi_rank.c: config, a world of ranks in threads, error paths.
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "capi_rank.h"
#include "test_fabric.h"

namespace {

TEST(CApi, ConfigInitDefaultsAndEnv) {
  char err[512] = "";
  EXPECT_EQ(capi_check_config(err, sizeof(err)), 0) << err;
}

TEST(CApi, AllReduceFromC) {
  auto f = ina::testing::TestFabric::Start({});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  constexpr int kWorld = 3;
  std::vector<int> rc(kWorld);
  std::vector<std::string> errs(kWorld);
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r) {
    ts.emplace_back([&, r] {
      char err[512] = "";
      rc[r] = capi_run_rank((*f)->port(), static_cast<uint16_t>(r), kWorld, err, sizeof(err));
      errs[r] = err;
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(rc[r], 0) << "rank " << r << ": " << errs[r];
}

TEST(CApi, ErrorsMapToCodesWithMessages) {
  uint16_t dead_port;
  {
    auto f = ina::testing::TestFabric::Start({});
    ASSERT_TRUE(f.ok());
    dead_port = (*f)->port();
  }
  char err[512] = "";
  EXPECT_EQ(capi_check_errors(dead_port, err, sizeof(err)), 0) << err;
}

}  // namespace
