// Runs the C checks in capi_rank.c: config, a world of ranks in threads, error paths.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "capi_config_util.h"
#include "capi_fill.h"
#include "capi_internal.h"
#include "capi_rank.h"
#include "ina/ina.h"
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

// Every field set through C is what the created communicator runs with; stats come back.
TEST(CApi, CreatedCommunicatorHasEveryFieldSetInC) {
  auto f = ina::testing::TestFabric::Start({});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ina_config c;
  ASSERT_EQ(ina_config_init(&c), INA_OK) << ina_last_error();
  capi_fill_every_field(&c, (*f)->port(), /*runnable=*/1);
  ina_comm* comm = nullptr;
  ASSERT_EQ(ina_comm_create(&c, &comm), INA_OK) << ina_last_error();
  ina::host::testing::ExpectFields(ina::host::capi::CommunicatorOf(comm).config(),
                                   ina::host::testing::EveryFieldConfig((*f)->port(), true),
                                   /*same=*/true);
  std::vector<int32_t> v(1000, 3);
  ASSERT_EQ(ina_allreduce_i32(comm, v.data(), v.size()), INA_OK) << ina_last_error();
  EXPECT_EQ(v[999], 3);  // world 1
  ina_stats st;
  ASSERT_EQ(ina_comm_stats(comm, &st), INA_OK) << ina_last_error();
  EXPECT_EQ(st.struct_size, sizeof(ina_stats));
  EXPECT_EQ(st.ops_completed, 1u);
  EXPECT_EQ(st.ops_failed, 0u);
  EXPECT_GE(st.packets_sent, 16u);  // 1000 elements at K = 64: 16 blocks
  EXPECT_GE(st.results, 16u);
  ina_comm_destroy(comm);
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
