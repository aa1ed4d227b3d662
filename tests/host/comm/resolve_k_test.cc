// ResolveK (communicator_factory.h): the default K follows the path's largest message, a K set by
// hand that would need IP fragmentation is refused at Create with both sizes named. FitWindow:
// the window asked fits the lanes' kernel receive queues.
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
  explicit SizedTransport(size_t max, size_t queue = 0, size_t buffer = 0)
      : max_(max), queue_(queue), buffer_(buffer) {}
  Result<size_t> SendBurst(std::span<const TxMessage>) override { return size_t{0}; }
  Result<size_t> RecvBurst(std::span<RxMessage>, std::chrono::microseconds) override {
    return size_t{0};
  }
  std::string_view name() const override { return "sized"; }
  size_t max_message_bytes() const override { return max_; }
  // `queue` messages of any size (the sizes FitWindow asks about are checked by ResolveK's K).
  size_t rx_queue_messages(size_t) const override { return queue_; }
  size_t rx_buffer_bytes() const override { return buffer_; }

 private:
  size_t max_;
  size_t queue_;
  size_t buffer_;
};

// Lanes with a kernel receive queue of `queues[l]` messages each, in a buffer of `buffer` bytes.
std::vector<std::unique_ptr<Transport>> QueueLanes(std::initializer_list<size_t> queues,
                                                   size_t buffer) {
  std::vector<std::unique_ptr<Transport>> v;
  for (size_t q : queues) v.push_back(std::make_unique<SizedTransport>(8972, q, buffer));
  return v;
}

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

TEST(FitWindowTest, EachLanesShareOfResultsFitsItsQueue) {
  CommConfig cfg;
  cfg.k = 2048;
  cfg.window = 256;
  // One lane whose buffer the kernel capped at Debian's rmem_max (208 KiB, reported doubled).
  std::string note = FitWindow(&cfg, QueueLanes({40}, 425984));
  EXPECT_EQ(cfg.window, 40);
  EXPECT_NE(note.find("window 256 -> 40 slots"), std::string::npos) << note;
  EXPECT_NE(note.find("208 KiB"), std::string::npos) << note;
  EXPECT_NE(note.find("8218 bytes (K=2048)"), std::string::npos) << note;
  EXPECT_NE(note.find("sysctl -w net.core.rmem_max=8388608"), std::string::npos) << note;
  // Two lanes carry half the slots each: the smaller queue decides, for both.
  cfg.window = 256;
  note = FitWindow(&cfg, QueueLanes({40, 30}, 425984));
  EXPECT_EQ(cfg.window, 60);
  // The buffer it was asked for, but still too small for the window: the note says to ask more.
  cfg.window = 256;
  cfg.socket_buffer_bytes = 1 << 20;
  note = FitWindow(&cfg, QueueLanes({200}, 2 << 20));
  EXPECT_EQ(cfg.window, 200);
  EXPECT_NE(note.find("INA_SOCKET_BUFFER_BYTES"), std::string::npos) << note;
  EXPECT_EQ(note.find("sysctl"), std::string::npos) << note;
}

TEST(FitWindowTest, AWindowThatFitsAndLanesWithoutAQueueAreLeftAlone) {
  CommConfig cfg;
  cfg.k = 256;
  cfg.window = 256;
  EXPECT_EQ(FitWindow(&cfg, QueueLanes({300}, 425984)), "");
  EXPECT_EQ(cfg.window, 256);
  EXPECT_EQ(FitWindow(&cfg, QueueLanes({0, 0}, 0)), "") << "dpdk, verbs: no kernel queue";
  EXPECT_EQ(cfg.window, 256);
  // A lane without a queue does not limit the others.
  EXPECT_NE(FitWindow(&cfg, QueueLanes({0, 100}, 425984)), "");
  EXPECT_EQ(cfg.window, 200);
  // Transports that know no queue (the default) do not limit.
  cfg.window = 256;
  (void)FitWindow(&cfg, Lanes({8972}));
  EXPECT_EQ(cfg.window, 256);
}

}  // namespace
}  // namespace ina::host::internal
