// ResolveK (communicator_factory.h): the default K follows the path's largest message, a K set by
// hand that would need IP fragmentation is refused at Create with both sizes named.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "communicator_factory.h"
#include "ina/proto/wire.h"

namespace ina::host::internal {
namespace {

// Only the size matters here: ResolveK sends nothing.
class SizedTransport final : public Transport {
 public:
  explicit SizedTransport(size_t max) : max_(max) {}
  Result<size_t> SendBurst(std::span<const TxMessage>) override { return size_t{0}; }
  Result<size_t> RecvBurst(std::span<RxMessage>, std::chrono::microseconds) override {
    return size_t{0};
  }
  std::string_view name() const override { return "sized"; }
  size_t max_message_bytes() const override { return max_; }

 private:
  size_t max_;
};

std::vector<std::unique_ptr<Transport>> Lanes(std::initializer_list<size_t> maxes) {
  std::vector<std::unique_ptr<Transport>> v;
  for (size_t m : maxes) v.push_back(std::make_unique<SizedTransport>(m));
  return v;
}

TEST(ResolveKTest, DefaultIsTheLargestKThePathCarries) {
  struct Case {
    size_t max_message;
    uint16_t k;
  } cases[] = {
      {1472, 256},   // Ethernet, MTU 1500, IPv4 + UDP
      {4096, 512},   // RoCEv2, MTU 4096
      {8972, 2048},  // jumbo, MTU 9000
      {65507, 2048},
      {proto::MessageBytes(1024), 1024},
      {proto::MessageBytes(1024) - 1, 512},
      {proto::MessageBytes(64), 64},
  };
  for (const Case& c : cases) {
    CommConfig cfg;
    ASSERT_EQ(cfg.k, 0) << "the default is auto";
    ASSERT_TRUE(ResolveK(&cfg, Lanes({c.max_message})).ok());
    EXPECT_EQ(cfg.k, c.k) << c.max_message << " bytes";
  }
}

TEST(ResolveKTest, TheNarrowestLaneDecides) {
  CommConfig cfg;
  ASSERT_TRUE(ResolveK(&cfg, Lanes({65507, 1472, 8972})).ok());
  EXPECT_EQ(cfg.k, 256);
}

TEST(ResolveKTest, AKThatDoesNotFitIsRefusedWithBothSizes) {
  CommConfig cfg;
  cfg.switch_host = "10.0.0.1";
  cfg.k = 2048;
  const Status s = ResolveK(&cfg, Lanes({1472}));
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("8218-byte messages"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("at most 1472 bytes"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("use k <= 256"), std::string::npos) << s.ToString();
  EXPECT_EQ(cfg.k, 2048) << "a refused K is not changed";
  // One that fits stays as set, even below what the path could carry.
  cfg.k = 64;
  ASSERT_TRUE(ResolveK(&cfg, Lanes({8972})).ok());
  EXPECT_EQ(cfg.k, 64);
}

TEST(ResolveKTest, NoKFitsATinyPath) {
  CommConfig cfg;
  const Status s = ResolveK(&cfg, Lanes({200}));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
}

}  // namespace
}  // namespace ina::host::internal
