// RtoEstimator: Jacobson/Karels with the gains of docs/host.md, the clamp, Karn and backoff.
#include "rto.h"

#include <gtest/gtest.h>

namespace ina::host::internal {
namespace {

using std::chrono::microseconds;

RtoConfig Cfg(int64_t min_us, int64_t initial_us, int64_t max_us) {
  return RtoConfig{min_us, initial_us, max_us};
}

TEST(RtoEstimator, InitialValueUntilTheFirstSample) {
  RtoEstimator e(Cfg(500, 5000, 200000));
  EXPECT_FALSE(e.has_sample());
  EXPECT_EQ(e.rto_us(), 5000);
}

TEST(RtoEstimator, FirstSampleSetsSrttAndHalfVariance) {
  RtoEstimator e(Cfg(500, 5000, 200000));
  EXPECT_TRUE(e.OnSample(microseconds(1000), /*retransmitted=*/false));
  EXPECT_TRUE(e.has_sample());
  EXPECT_DOUBLE_EQ(e.srtt_us(), 1000);
  EXPECT_DOUBLE_EQ(e.rttvar_us(), 500);
  EXPECT_EQ(e.rto_us(), 1000 + 4 * 500);
}

TEST(RtoEstimator, LaterSamplesUseGainsOneEighthAndOneQuarter) {
  RtoEstimator e(Cfg(1, 5000, 1000000));
  ASSERT_TRUE(e.OnSample(microseconds(1000), false));
  ASSERT_TRUE(e.OnSample(microseconds(3000), false));
  // rttvar = 3/4 * 500 + 1/4 * |1000 - 3000| = 875; srtt = 7/8 * 1000 + 1/8 * 3000 = 1250.
  EXPECT_DOUBLE_EQ(e.rttvar_us(), 875);
  EXPECT_DOUBLE_EQ(e.srtt_us(), 1250);
  EXPECT_EQ(e.rto_us(), 1250 + 4 * 875);
  ASSERT_TRUE(e.OnSample(microseconds(1250), false));
  // rttvar = 3/4 * 875 + 0 = 656.25; srtt unchanged.
  EXPECT_DOUBLE_EQ(e.rttvar_us(), 656.25);
  EXPECT_DOUBLE_EQ(e.srtt_us(), 1250);
  EXPECT_EQ(e.rto_us(), 1250 + 2625);
}

TEST(RtoEstimator, GainsAreDividedBySamplesPerRoundTrip) {
  RtoConfig c = Cfg(1, 5000, 1000000);
  c.samples_per_rtt = 4;
  RtoEstimator e(c);
  ASSERT_TRUE(e.OnSample(microseconds(1000), false));  // first: srtt 1000, rttvar 500 as ever
  ASSERT_TRUE(e.OnSample(microseconds(3000), false));
  // rttvar = (1 - 1/16) * 500 + 1/16 * 2000 = 593.75; srtt = (1 - 1/32) * 1000 + 1/32 * 3000.
  EXPECT_DOUBLE_EQ(e.rttvar_us(), 593.75);
  EXPECT_DOUBLE_EQ(e.srtt_us(), 1062.5);
  // A window of 64 slots: a round trip of fast results, one of results delayed by a 6 ms stall,
  // one of fast results again. Divided gains still cover the stall (RTO 6192 us); undivided
  // ones forgot it within the last round trip (1009 us), so the next stall would time out every
  // slot again.
  RtoConfig w = Cfg(1, 5000, 1000000);
  w.samples_per_rtt = 64;
  RtoEstimator slow(w);
  RtoEstimator fast(Cfg(1, 5000, 1000000));
  for (RtoEstimator* x : {&fast, &slow}) {
    for (int i = 0; i < 64; ++i) ASSERT_TRUE(x->OnSample(microseconds(1000), false));
    for (int i = 0; i < 64; ++i) ASSERT_TRUE(x->OnSample(microseconds(6000), false));
    for (int i = 0; i < 64; ++i) ASSERT_TRUE(x->OnSample(microseconds(1000), false));
  }
  EXPECT_GT(slow.rto_us(), 6000);
  EXPECT_LT(fast.rto_us(), 1100);
}

TEST(RtoEstimator, ClampedToMinAndMax) {
  RtoEstimator lo(Cfg(500, 5000, 200000));
  ASSERT_TRUE(lo.OnSample(microseconds(10), false));  // 10 + 4 * 5 = 30 < 500
  EXPECT_EQ(lo.rto_us(), 500);
  RtoEstimator hi(Cfg(500, 5000, 200000));
  ASSERT_TRUE(hi.OnSample(microseconds(100000), false));  // 300000 > 200000
  EXPECT_EQ(hi.rto_us(), 200000);
}

TEST(RtoEstimator, KarnIgnoresSamplesOfRetransmittedPackets) {
  RtoEstimator e(Cfg(500, 5000, 200000));
  EXPECT_FALSE(e.OnSample(microseconds(90000), /*retransmitted=*/true));
  EXPECT_FALSE(e.has_sample());
  EXPECT_EQ(e.rto_us(), 5000);
  ASSERT_TRUE(e.OnSample(microseconds(1000), false));
  const int64_t before = e.rto_us();
  EXPECT_FALSE(e.OnSample(microseconds(150000), true));
  EXPECT_EQ(e.rto_us(), before);
  EXPECT_DOUBLE_EQ(e.srtt_us(), 1000);
}

TEST(RtoEstimator, BackoffDoublesUpToMax) {
  RtoEstimator e(Cfg(500, 5000, 30000));
  EXPECT_EQ(e.Backoff(5000), 10000);
  EXPECT_EQ(e.Backoff(10000), 20000);
  EXPECT_EQ(e.Backoff(20000), 30000);
  EXPECT_EQ(e.Backoff(30000), 30000);
  EXPECT_EQ(e.rto_us(), 5000);  // retries do not change the estimate
}

}  // namespace
}  // namespace ina::host::internal
