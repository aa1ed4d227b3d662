// ina-bench's TCP coordination (tools/ina_bench/coord_wire.h, coordinator.h, coord_client.h) on
// loopback, coordinator and clients in one process: the codec, a whole run (join, options,
// barriers, the store, reports into the region), and every failure a worker elsewhere can meet,
// each answered with an error that names the rank within a bound: mismatched options, a rank that
// dies, a rank that never connects, a coordinator that goes away, duplicate and out-of-range ranks.
#include "coordinator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "coord_client.h"
#include "coord_wire.h"
#include "options.h"
#include "shared.h"

namespace ina::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(CoordWire, RoundTripAndBadInput) {
  RankSlot slot{};
  slot.ina_code = 3;
  std::snprintf(slot.ina_error, sizeof(slot.ina_error), "boom");
  slot.ina_ms[0] = 1.5;
  slot.gloo_ms[1] = 2.5;
  slot.fingerprint = 0x0123456789abcdefull;
  slot.socket_drops = 42;
  slot.window = 199;
  Writer w(Msg::kReport);
  w.I32(-7).Str("key").ArgList({{"--elements", "5"}});
  EncodeSlot(w, slot, 2);
  const std::string frame = w.Frame();
  auto head = ParseHead(frame.data(), 1 << 20);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->type, Msg::kReport);
  EXPECT_EQ(head->body, frame.size() - kFrameHead);
  EXPECT_FALSE(ParseHead(frame.data(), head->body - 1).ok()) << "oversized body refused";
  Reader r(std::string_view(frame).substr(kFrameHead));
  int32_t code;
  std::string key;
  Args args;
  RankSlot back{};
  ASSERT_TRUE(r.I32(&code) && r.Str(&key) && r.ArgList(&args) && DecodeSlot(r, &back, 2));
  EXPECT_TRUE(r.done());
  EXPECT_EQ(code, -7);
  EXPECT_EQ(key, "key");
  EXPECT_EQ(args, (Args{{"--elements", "5"}}));
  EXPECT_EQ(back.ina_code, 3);
  EXPECT_STREQ(back.ina_error, "boom");
  EXPECT_EQ(back.ina_ms[0], 1.5);
  EXPECT_EQ(back.gloo_ms[1], 2.5);
  EXPECT_EQ(back.fingerprint, slot.fingerprint);
  EXPECT_EQ(back.socket_drops, 42u);
  EXPECT_EQ(back.window, 199u);
  // A truncated body and a slot with another iteration count do not decode.
  Reader shortr(std::string_view(frame).substr(kFrameHead, 10));
  EXPECT_FALSE(shortr.I32(&code) && shortr.Str(&key));
  Reader other(std::string_view(frame).substr(kFrameHead));
  ASSERT_TRUE(other.I32(&code) && other.Str(&key) && other.ArgList(&args));
  EXPECT_FALSE(DecodeSlot(other, &back, 3));
  for (const char* bad : {"nohost", ":1", "h:", "h:65536", "h:1x"}) {
    EXPECT_FALSE(ParseTcpAddress(bad).ok()) << bad;
  }
  EXPECT_EQ(ParseTcpAddress("10.0.0.1:47100")->port, 47100);
}

// A coordinator for `workers` ranks on loopback, with a region of its own.
class CoordTest : public ::testing::Test {
 protected:
  void StartCoordinator(int workers, std::chrono::milliseconds join_timeout = 10s) {
    o_.workers = workers;
    o_.elements = 16;
    o_.iters = 2;
    o_.job = 77;
    mem_.assign(MapBytes(o_), 0);
    CoordinatorSetup cs;
    cs.workers = workers;
    cs.iters = o_.iters;
    cs.elements = o_.elements;
    cs.run_args = RunArgs(o_);
    cs.switch_addr = "127.0.0.1:47000";
    cs.join_timeout = join_timeout;
    cs.warn = [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mu_);
      warnings_ += l + "\n";
    };
    auto c = Coordinator::Create(std::move(cs), "127.0.0.1:0", {});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    coord_ = std::move(*c);
    coord_->Start(ViewOf(mem_.data(), o_), [this] { events_++; });
  }

  Result<std::unique_ptr<CoordClient>> Join(int rank, Args given = {},
                                            std::function<void(const Status&)> lost = nullptr) {
    return CoordClient::Connect(coord_->address(rank), rank, given, 5s, std::move(lost));
  }

  // Waits (bounded) until the coordinator has resolved every rank.
  bool WaitDone(std::chrono::milliseconds limit = 10s) {
    const auto until = Clock::now() + limit;
    while (!coord_->done() && Clock::now() < until) std::this_thread::sleep_for(5ms);
    return coord_->done();
  }

  void TearDown() override {
    if (coord_) coord_->Stop("test over");  // before the members its thread touches go
  }

  std::string Warnings() {
    std::lock_guard<std::mutex> lock(mu_);
    return warnings_;
  }

  Options o_;
  std::vector<uint8_t> mem_;
  std::unique_ptr<Coordinator> coord_;
  std::atomic<int> events_{0};
  std::mutex mu_;
  std::string warnings_;
};

TEST_F(CoordTest, WholeRunReportsIntoTheRegion) {
  StartCoordinator(3);
  std::vector<std::thread> ranks;
  std::atomic<int> ok{0};
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      auto c = Join(r, r == 1 ? Args{{"--elements", "16"}} : Args{});
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      Options mine;
      mine.role_worker = true;
      mine.coordinator = "x:1";
      mine.rank = r;
      mine.switch_addr = (*c)->switch_addr();
      ASSERT_TRUE(ApplyRunArgs(&mine, (*c)->run_args()).ok());
      EXPECT_EQ(mine.workers, 3);
      EXPECT_EQ(mine.elements, 16u);
      EXPECT_EQ(mine.job, 77);
      EXPECT_EQ(mine.switch_addr, "127.0.0.1:47000");
      for (int b = 0; b < 3; ++b) ASSERT_TRUE((*c)->Barrier(5s).ok());
      // The store: each rank sets its key, then waits for and reads the others'.
      ASSERT_TRUE((*c)->Set("k" + std::to_string(r), {static_cast<char>('a' + r)}, 5s).ok());
      ASSERT_TRUE((*c)->Wait({"k0", "k1", "k2"}, 5s).ok());
      auto v = (*c)->Get("k" + std::to_string((r + 1) % 3), 5s);
      ASSERT_TRUE(v.ok()) << v.status().ToString();
      EXPECT_EQ(*v, std::vector<char>{static_cast<char>('a' + (r + 1) % 3)});
      RankSlot slot{};
      slot.fingerprint = 100 + r;
      slot.ina_ms[1] = r;
      std::vector<uint8_t> result(r == 0 ? 64 : 0, 0xAB);
      ASSERT_TRUE((*c)->Report(0, slot, 2, result, {}, 5s).ok());
      ok++;
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_EQ(ok, 3);
  ASSERT_TRUE(WaitDone());
  coord_->Stop("unused");
  EXPECT_FALSE(coord_->first_failure().has_value());
  const SharedView view = ViewOf(mem_.data(), o_);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(coord_->outcomes()[r].state, RankOutcome::State::kReported);
    EXPECT_EQ(coord_->outcomes()[r].exit_code, 0);
    EXPECT_EQ(view.shared->ranks[r].fingerprint, 100u + r);
    EXPECT_EQ(view.shared->ranks[r].ina_ms[1], r);
  }
  EXPECT_EQ(view.result0[0], 0xAB);
  EXPECT_EQ(view.result0[63], 0xAB);
  EXPECT_GT(events_.load(), 0);
}

TEST_F(CoordTest, MismatchedOptionIsRefusedAndFailsTheOthers) {
  StartCoordinator(2);
  auto good = Join(0);
  ASSERT_TRUE(good.ok());
  auto bad = Join(1, {{"--elements", "999"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("--elements is '999'"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("'16' at the coordinator"), std::string::npos);
  const auto t0 = Clock::now();
  Status b = (*good)->Barrier(20s);
  EXPECT_LT(Clock::now() - t0, 2s) << "the barrier must fail at once";
  EXPECT_EQ(b.code(), StatusCode::kAborted);
  EXPECT_NE(b.message().find("rank 1"), std::string::npos) << b.message();
  EXPECT_NE(b.message().find("--elements"), std::string::npos) << b.message();
  EXPECT_NE(Warnings().find("--elements"), std::string::npos) << Warnings();
}

TEST_F(CoordTest, DeadRankFailsTheBarrierNamingIt) {
  StartCoordinator(3);
  auto r0 = Join(0);
  auto r1 = Join(1);
  auto r2 = Join(2);
  ASSERT_TRUE(r0.ok() && r1.ok() && r2.ok());
  auto waiting = std::async(std::launch::async, [&] { return (*r0)->Barrier(20s); });
  std::this_thread::sleep_for(50ms);
  const auto t0 = Clock::now();
  r2->reset();  // rank 2's process "dies": its connection closes without a report
  Status b = waiting.get();
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(b.code(), StatusCode::kAborted);
  EXPECT_NE(b.message().find("rank 2"), std::string::npos) << b.message();
  EXPECT_NE(b.message().find("without reporting"), std::string::npos) << b.message();
  // Later requests fail at once too, the store's included.
  EXPECT_EQ((*r1)->Get("never", 20s).status().code(), StatusCode::kAborted);
  ASSERT_TRUE(coord_->first_failure().has_value());
}

TEST_F(CoordTest, RankThatNeverConnectsIsNamedAfterTheJoinTimeout) {
  StartCoordinator(2, 300ms);
  auto r0 = Join(0);
  ASSERT_TRUE(r0.ok());
  const auto t0 = Clock::now();
  Status b = (*r0)->Barrier(20s);
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_NE(b.message().find("rank 1"), std::string::npos) << b.message();
  EXPECT_NE(b.message().find("did not connect"), std::string::npos) << b.message();
}

TEST_F(CoordTest, DuplicateAndOutOfRangeRanksAreRefused) {
  StartCoordinator(2);
  auto r0 = Join(0);
  ASSERT_TRUE(r0.ok());
  auto again = Join(0);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already connected"), std::string::npos)
      << again.status().message();
  auto far = CoordClient::Connect(coord_->address(0), 5, {}, 5s, nullptr);
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("out of range"), std::string::npos);
  // Neither is a failure of the run: rank 1 may still come.
  EXPECT_FALSE(coord_->first_failure().has_value());
  auto r1 = Join(1);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  auto b0 = std::async(std::launch::async, [&] { return (*r0)->Barrier(5s); });
  EXPECT_TRUE((*r1)->Barrier(5s).ok());
  EXPECT_TRUE(b0.get().ok());
}

TEST_F(CoordTest, LostCoordinatorIsSeenAtOnce) {
  StartCoordinator(2);
  std::promise<Status> lost;
  auto r0 = Join(0, {}, [&](const Status& s) { lost.set_value(s); });
  ASSERT_TRUE(r0.ok());
  auto waiting = std::async(std::launch::async, [&] { return (*r0)->Barrier(20s); });
  std::this_thread::sleep_for(50ms);
  const auto t0 = Clock::now();
  coord_->Stop("test");
  auto f = lost.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready) << "on_lost not called";
  EXPECT_NE(f.get().message().find("coordinator at " + coord_->address(0)), std::string::npos);
  Status b = waiting.get();
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(b.code(), StatusCode::kUnavailable) << b.ToString();
}

TEST(CoordClientTest, UnreachableCoordinatorTimesOutNamingIt) {
  // A port nobody listens on (bound, then closed).
  auto fd = ListenTcp(TcpAddress{"127.0.0.1", 0});
  ASSERT_TRUE(fd.ok());
  const std::string addr = LocalAddress(*fd);
  close(*fd);
  const auto t0 = Clock::now();
  auto c = CoordClient::Connect(addr, 0, {}, 500ms, nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_LT(Clock::now() - t0, 3s);
  EXPECT_EQ(c.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(c.status().message().find(addr), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace ina::bench
