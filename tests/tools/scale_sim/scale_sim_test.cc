// ina-scale-sim, run as a process on small topologies (each case well under a second): its times
// against closed forms, and the comparisons the scale figures rest on (docs/scale.md).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ina/proto/wire.h"

namespace {

struct SimRun {
  int status = -1;
  std::string out;  // stdout and stderr
};

SimRun Sim(const std::string& args) {
  SimRun r;
  const std::string cmd = std::string(INA_SCALE_SIM_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The number after "key": in the JSON line (NaN if absent).
double Field(const SimRun& r, const std::string& key) {
  const size_t at = r.out.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(r.out.c_str() + at + key.size() + 3, nullptr);
}

double TimeMs(const std::string& args) {
  const SimRun r = Sim(args);
  EXPECT_EQ(r.status, 0) << r.out;
  const double t = Field(r, "time_ms");
  EXPECT_TRUE(t > 0) << r.out;
  return t;
}

TEST(ScaleSim, RingMatchesClosedForm) {
  // 4 workers, 1 Gbit/s, 1 MiB: 2(n-1) steps of S/n bytes plus TCP headers and ACKs, 2 hops of
  // 1 us and a 20 us step cost each.
  const int n = 4;
  const double s = 4.0 * 262144;
  const double payload = s / n;
  const double segs = std::ceil(payload / 1448);
  const double wire = payload + segs * (66 + 24) + std::ceil(segs / 2) * (66 + 24);
  const double step_s = wire * 8 / 1e9 + 2e-6 + 20e-6;
  const double closed_ms = 2 * (n - 1) * step_s * 1e3;
  const double t = TimeMs(
      "--algo ring --workers 4 --rate 1gbit --elements 262144 "
      "--hop-latency-us 1 --ring-step-us 20");
  EXPECT_NEAR(t, closed_ms, 0.01 * closed_ms);
  // And the law itself: the bandwidth term grows as 2(n-1)/n with n at a fixed size.
  const double t8 = TimeMs(
      "--algo ring --workers 8 --rate 1gbit --elements 262144 "
      "--hop-latency-us 0 --acks 0 --mss 1000000 --tcp-header 0 --overhead 0");
  const double law8 = 2.0 * 7 / 8 * s * 8 / 1e9 * 1e3;
  EXPECT_NEAR(t8, law8, 0.01 * law8);
}

TEST(ScaleSim, InaAtItsLineRateBound) {
  // Bandwidth-bound (window covers the round trip): within 2% of wire bytes / rate, and the wire
  // bytes are the generated header's frames.
  const SimRun r = Sim("--workers 4 --rate 100mbit --elements 1048576");
  ASSERT_EQ(r.status, 0) << r.out;
  const double frames = 1048576 / 256;
  const double wire =
      frames * (ina::proto::kFramePrefixBytes + ina::proto::MessageBytes(256) + 24) +
      256 * (ina::proto::kFramePrefixBytes + ina::proto::MessageBytes(0) + 24);
  EXPECT_DOUBLE_EQ(Field(r, "wire_bytes_per_worker"), wire);
  const double bound_ms = wire * 8 / 100e6 * 1e3;
  EXPECT_NEAR(Field(r, "bound_ms"), bound_ms, 1e-3);
  EXPECT_GE(Field(r, "time_ms"), bound_ms);
  EXPECT_LE(Field(r, "time_ms"), 1.02 * bound_ms);
}

TEST(ScaleSim, InaBeatsRingWhenBandwidthBound) {
  const std::string common = " --workers 8 --rate 1gbit --elements 1048576";
  const double ina = TimeMs("--algo ina" + common);
  const double ring = TimeMs("--algo ring" + common);
  // The ring moves 2(n-1)/n = 1.75 times the bytes; ina's frames cost ~8% more than TCP's.
  EXPECT_GT(ring / ina, 1.5) << "ina " << ina << " ms, ring " << ring << " ms";
}

TEST(ScaleSim, InaWinsWhenLatencyBound) {
  // A tiny tensor with 50 us per hop: the ring pays 2(n-1) latencies, ina one round trip.
  const std::string common = " --workers 16 --rate 10gbit --elements 1024 --hop-latency-us 50";
  const double ina = TimeMs("--algo ina" + common);
  const double ring = TimeMs("--algo ring" + common);
  EXPECT_GT(ring, 10 * ina) << "ina " << ina << " ms, ring " << ring << " ms";
}

TEST(ScaleSim, TwoLevelsEqualOneAtTheBottleneck) {
  // 16 workers in 4 leaves vs one flat switch: the same worker links bind, so two levels cost only
  // the extra hops and one more chunk of store and forward at each extra stage.
  const std::string common = " --workers 16 --rate 1gbit --elements 1048576 --hop-latency-us 5";
  const SimRun flat = Sim("--leaf-size 0" + common);
  const SimRun two = Sim("--leaf-size 4" + common);
  ASSERT_EQ(flat.status, 0) << flat.out;
  ASSERT_EQ(two.status, 0) << two.out;
  EXPECT_EQ(Field(flat, "levels"), 1);
  EXPECT_EQ(Field(two, "levels"), 2);
  const double t1 = Field(flat, "time_ms");
  const double t2 = Field(two, "time_ms");
  const double chunk_ms = Field(two, "chunk_packets") * 1116 * 8 / 1e9 * 1e3;
  EXPECT_GE(t2, t1);
  EXPECT_LE(t2 - t1, 2 * chunk_ms + 4 * 2 * 5e-3) << "flat " << t1 << " ms, two-level " << t2;
}

TEST(ScaleSim, OversubscribedUplinksSlowTheRingNotIna) {
  // 2 jobs of 8 spread over 4 leaves of 4 with 2:1 uplinks (2 Gbit/s): every ring hop crosses
  // the spine (4 flows up per leaf), ina sends one stream per job and leaf up (2 per leaf).
  const std::string common =
      " --workers 8 --jobs 2 --leaf-size 4 --placement spread --oversub 2 --rate 1gbit "
      "--elements 262144";
  const double ina = TimeMs("--algo ina" + common);
  const double ring = TimeMs("--algo ring" + common);
  const double ina_alone = TimeMs("--algo ina --workers 8 --rate 1gbit --elements 262144");
  const double ring_alone = TimeMs("--algo ring --workers 8 --rate 1gbit --elements 262144");
  EXPECT_LT(ina, 1.1 * ina_alone);
  EXPECT_GT(ring, 1.5 * ring_alone);
}

TEST(ScaleSim, SoftwareSwitchCpuIsSharedByItsPorts) {
  // 10 us per packet on one switch CPU at 1 Gbit/s (8.9 us per frame): the CPU binds, and twice
  // the workers take twice as long; every frame (data and exponent) passes it once per worker.
  const std::string common = " --rate 1gbit --elements 262144 --switch-cost-us 10";
  const double t4 = TimeMs("--workers 4" + common);
  const double t8 = TimeMs("--workers 8" + common);
  const double cpu4_ms = 4 * (262144 / 256 + 256) * 10e-3;
  EXPECT_GE(t4, cpu4_ms);
  EXPECT_LE(t4, 1.05 * cpu4_ms);
  EXPECT_NEAR(t8 / t4, 2.0, 0.1);
  // Without the cost the same runs are at the line rate, the same for 4 and 8 workers.
  EXPECT_NEAR(TimeMs("--workers 4 --rate 1gbit --elements 262144"),
              TimeMs("--workers 8 --rate 1gbit --elements 262144"), 1e-6);
}

TEST(ScaleSim, BadInputIsRefused) {
  for (const char* args :
       {"--workers 1", "--k 100", "--rate fast", "--algo tree", "--placement spread",
        "--tcp-efficiency 0", "--switch-cost-us -1", "--bogus 1"}) {
    const SimRun r = Sim(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("ina-scale-sim: "), std::string::npos) << r.out;
  }
}

}  // namespace
