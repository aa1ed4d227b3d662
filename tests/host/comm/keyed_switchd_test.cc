// Authenticated jobs end to end (docs/security.md, issue #23): real workers (libina's Communicator)
// and the real ina-switchd with an admin key file, the job's key installed with set_key as
// ina-jobkey sends it.
//
// - A keyed job (mac, mac_encrypt; 2 and 4 ranks, and 2 lanes per rank; grants renewed every 2
//   calls, so keys change)
//   gives results bit-identical to a CRC-only job run beside it on the same data, and that
//   neighbour stays exact.
// - A rank with the wrong secret gets a bounded error, not a hang, and nothing of its is summed.
// - Attacks through the in-repo proxy (rewrite_proxy.h): headers (exp, next_exp) and payloads
//   rewritten both ways with the checksum recomputed; in crc mode no rank returns OK with a wrong
//   result, in mac and mac_encrypt the job completes bit-identically. Captured data replayed from
//   the members' own addresses in a later grant, and spoofed from another socket, are counted and
//   dropped, and the job stays exact.
//
// Seeds: INA_SEED (printed) picks the float inputs; the default is fixed.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ina/host/communicator.h"
#include "ina/host/job_alloc.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "rewrite_proxy.h"
#include "support/seed.h"
#include "support/switchd_process.h"

namespace ina::host {
namespace {

namespace p = ::ina::proto;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using RewriteProxy = ::ina::testing::RewriteProxy;

// One seed for the whole process (printed once), so that INA_SEED=random stays one seed.
uint64_t Seed() {
  static const uint64_t seed = ::ina::tests::Seed();
  return seed;
}

std::vector<uint8_t> Secret(uint8_t seed) {
  std::vector<uint8_t> s(32);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed * 37 + i * 11);
  return s;
}

std::string Hex(const std::vector<uint8_t>& bytes) {
  std::string hex;
  char b[3];
  for (uint8_t x : bytes) {
    std::snprintf(b, sizeof b, "%02x", x);
    hex += b;
  }
  return hex;
}

// The switch's admin key in a file only its owner may read (a fresh directory, removed at the
// end).
class AdminKeyFile {
 public:
  explicit AdminKeyFile(const std::vector<uint8_t>& secret) {
    char dir[] = "/tmp/ina_keyed_e2e_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      ADD_FAILURE() << "mkdtemp";
      return;
    }
    dir_ = dir;
    path_ = dir_ + "/admin.key";
    std::ofstream(path_) << Hex(secret) << "\n";
    EXPECT_EQ(chmod(path_.c_str(), 0600), 0);
  }
  ~AdminKeyFile() {
    std::remove(path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

const std::vector<uint8_t> kAdmin = Secret(200);

// ina-switchd with an admin key (and the extra flags), the key file kept as long as it runs.
struct KeyedSwitch {
  explicit KeyedSwitch(std::vector<std::string> extra) : admin(kAdmin) {
    std::vector<std::string> args{"--port", "0", "--admin-key-file", admin.path()};
    args.insert(args.end(), extra.begin(), extra.end());
    sw = std::make_unique<test::SwitchProcess>(args);
  }
  uint16_t port() const { return sw->port(); }
  // Installs job `job`'s secret with set_key from an operator socket, as ina-jobkey does.
  void InstallKey(uint16_t job, p::SecMode mode, const std::vector<uint8_t>& secret) {
    // Sequences as ina-jobkey makes them (the switch refuses ones older than its start).
    static uint64_t attempt = 0;
    const uint64_t seq = p::SetKeySequence(std::chrono::system_clock::now(), ++attempt % 64);
    test::Worker op(port());
    op.Send(p::SealSetKey(kAdmin, job, mode, secret, seq).value());
    auto ack = op.Recv();
    ASSERT_TRUE(ack.has_value()) << "no set_key_ack";
    ASSERT_EQ(p::GetType(ack->data()), p::MsgType::kSetKeyAck);
  }
  AdminKeyFile admin;
  std::unique_ptr<test::SwitchProcess> sw;
};

const char* ModeName(p::SecMode m) {
  return m == p::SecMode::kCrc ? "crc" : m == p::SecMode::kMac ? "mac" : "mac_encrypt";
}

// One rank of a job: its calls' inputs (float, then int32, per call) and what came back.
struct Rank {
  uint16_t job = 0;
  int rank = 0, world = 0;
  p::SecMode mode = p::SecMode::kCrc;
  std::vector<uint8_t> secret;
  std::vector<std::vector<float>> f;
  std::vector<std::vector<int32_t>> i;
  int lanes = 1;
  int cores = 1;      // CommConfig::switch_cores: lanes on switch cores (then lanes == cores)
  uint16_t port = 0;  // its switch (a tree's leaf); 0: the one RunRanks names
  int join_timeout_ms = 10000;
  Status status;  // the first failure
  Clock::duration took{};
  Clock::duration joined_in{};  // Communicator::Create's time: the join, or its failure
  CommStats stats;
};

CommConfig ConfigOf(const Rank& x, uint16_t port) {
  CommConfig c;
  c.switch_host = "127.0.0.1";
  c.switch_port = x.port != 0 ? x.port : port;
  c.job_id = x.job;
  c.world_size = static_cast<uint16_t>(x.world);
  c.rank = static_cast<uint16_t>(x.rank);
  c.k = 256;
  c.window = 8;
  c.join_timeout_ms = x.join_timeout_ms;
  c.progress_timeout_ms = 10000;
  c.progress_threads = x.lanes;
  c.switch_cores = x.cores;
  c.sec = ModeName(x.mode);
  if (x.mode != p::SecMode::kCrc) c.job_secret = JobSecret(x.secret);
  return c;
}

// Runs every rank's calls (call c: float c, then int32 c) in a thread each. `between(c)`, if
// given, runs once every rank finished call c (ranks wait for it at a barrier), before call c+1.
void RunRanks(std::vector<Rank>& ranks, uint16_t port, int progress_timeout_ms = 10000,
              const std::function<void(size_t)>& between = nullptr) {
  const size_t calls = ranks[0].f.size();
  std::barrier sync(static_cast<std::ptrdiff_t>(ranks.size()), [&]() noexcept {});
  size_t step = 0;
  std::barrier after_call(static_cast<std::ptrdiff_t>(ranks.size()), [&]() noexcept {
    if (between) between(step);
    ++step;
  });
  std::vector<std::thread> ts;
  for (Rank& x : ranks) {
    ts.emplace_back([&, &x = x] {
      CommConfig c = ConfigOf(x, port);
      c.progress_timeout_ms = progress_timeout_ms;
      const auto created = Clock::now();
      auto comm = Communicator::Create(c);
      x.joined_in = Clock::now() - created;
      if (!comm.ok()) x.status = comm.status();
      sync.arrive_and_wait();
      const auto t0 = Clock::now();
      for (size_t k = 0; k < calls; ++k) {
        if (x.status.ok()) x.status = (*comm)->AllReduce(std::span(x.f[k]));
        if (x.status.ok()) x.status = (*comm)->AllReduce(std::span(x.i[k]));
        after_call.arrive_and_wait();
      }
      x.took = Clock::now() - t0;
      if (comm.ok()) x.stats = (*comm)->stats();
    });
  }
  for (auto& t : ts) t.join();
}

// A job's ranks with `calls` calls of n elements each: random floats (seeded) or, with `exact`,
// integers below 2^10 in magnitude (every quantized value and sum exact, so a correct result is
// the exact sum bit for bit); random int32.
std::vector<Rank> Job(uint16_t job, int world, p::SecMode mode, const std::vector<uint8_t>& secret,
                      size_t calls, size_t n, bool exact, uint64_t salt) {
  std::vector<Rank> ranks(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    Rank& x = ranks[static_cast<size_t>(r)];
    x.job = job;
    x.rank = r;
    x.world = world;
    x.mode = mode;
    x.secret = secret;
    std::mt19937_64 rng(Seed() * 7919 + salt * 131 + static_cast<uint64_t>(r));
    for (size_t c = 0; c < calls; ++c) {
      std::vector<float> f(n);
      std::vector<int32_t> i(n);
      std::normal_distribution<float> g(0.0f, 3.0f);
      for (size_t e = 0; e < n; ++e) {
        f[e] = exact ? static_cast<float>(static_cast<int>(rng() % 2001) - 1000)
                     : g(rng) * static_cast<float>(1 + e % 5);
        i[e] = static_cast<int32_t>(rng());
      }
      x.f.push_back(std::move(f));
      x.i.push_back(std::move(i));
    }
  }
  return ranks;
}

// The exact sums of a job made with exact = true.
void ExpectExact(const std::vector<Rank>& ranks, const std::vector<Rank>& inputs) {
  for (size_t c = 0; c < inputs[0].f.size(); ++c) {
    std::vector<float> fs(inputs[0].f[c].size(), 0.0f);
    std::vector<int32_t> is(inputs[0].i[c].size(), 0);
    for (const Rank& x : inputs) {
      for (size_t e = 0; e < fs.size(); ++e) {
        fs[e] += x.f[c][e];
        is[e] =
            static_cast<int32_t>(static_cast<uint32_t>(is[e]) + static_cast<uint32_t>(x.i[c][e]));
      }
    }
    for (const Rank& x : ranks) {
      if (!x.status.ok()) continue;
      size_t wrong = 0;
      for (size_t e = 0; e < fs.size(); ++e) wrong += x.f[c][e] != fs[e] || x.i[c][e] != is[e];
      EXPECT_EQ(wrong, 0u) << "job " << x.job << " rank " << x.rank << " call " << c
                           << ": OK with a wrong result";
    }
  }
}

// ---- Keyed jobs, bit-identical to CRC-only ----

struct Case {
  p::SecMode mode;
  int world;
  int lanes = 1;  // progress threads per rank
};

class KeyedSwitchd : public ::testing::TestWithParam<Case> {};

TEST_P(KeyedSwitchd, BitIdenticalToACrcOnlyJobBesideIt) {
  const Case c = GetParam();
  constexpr uint16_t kKeyed = 41, kCrc = 42;
  constexpr size_t kCalls = 4, kN = 256 * 8 * 3 + 77;
  KeyedSwitch sw({"--lease-calls", "2"});  // a new grant, so new keys, every 2 calls
  ASSERT_NE(sw.port(), 0);
  const auto secret = Secret(1);
  sw.InstallKey(kKeyed, c.mode, secret);
  std::vector<Rank> keyed = Job(kKeyed, c.world, c.mode, secret, kCalls, kN, false, 5);
  std::vector<Rank> crc = Job(kCrc, c.world, p::SecMode::kCrc, {}, kCalls, kN, false, 5);
  for (Rank& x : keyed) x.lanes = c.lanes;
  std::vector<Rank> all = keyed;
  all.insert(all.end(), crc.begin(), crc.end());
  RunRanks(all, sw.port());
  for (int r = 0; r < c.world; ++r) {
    const Rank& k = all[static_cast<size_t>(r)];
    const Rank& o = all[static_cast<size_t>(c.world + r)];
    ASSERT_TRUE(k.status.ok()) << "keyed rank " << r << ": " << k.status.ToString();
    ASSERT_TRUE(o.status.ok()) << "crc rank " << r << ": " << o.status.ToString();
    for (size_t call = 0; call < kCalls; ++call) {
      ASSERT_EQ(k.f[call].size(), o.f[call].size());
      EXPECT_EQ(std::memcmp(k.f[call].data(), o.f[call].data(), k.f[call].size() * 4), 0)
          << "rank " << r << " call " << call << ": float results differ";
      EXPECT_EQ(k.i[call], o.i[call]) << "rank " << r << " call " << call;
    }
    EXPECT_EQ(k.stats.results_forged, 0u);
  }
  const auto counters = sw.sw->Stop();
  EXPECT_EQ(counters.at("keys_installed"), 1u);
  EXPECT_EQ(counters.at("drop_forged"), 0u);
  EXPECT_EQ(counters.at("drop_cross_job"), 0u);
  EXPECT_GE(counters.at("regrants"), 2u) << "the keys never changed";
}

INSTANTIATE_TEST_SUITE_P(Modes, KeyedSwitchd,
                         ::testing::Values(Case{p::SecMode::kMac, 2}, Case{p::SecMode::kMac, 4},
                                           Case{p::SecMode::kMacEncrypt, 2},
                                           Case{p::SecMode::kMacEncrypt, 4},
                                           Case{p::SecMode::kMac, 2, 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(ModeName(info.param.mode)) + "_" +
                                  std::to_string(info.param.world) + "ranks" +
                                  (info.param.lanes > 1
                                       ? "_" + std::to_string(info.param.lanes) + "lanes"
                                       : std::string());
                         });

// A rank with the wrong secret on a switch that requires keys: every rank gets a bounded error,
// and nothing of the wrong rank's is summed (no result at all). Its JOIN's proof fails
// (joins_unproven), so it never joins and sends no data; it says why at its join timeout. The
// other rank's join times out too, or the switch aborts the job for it first, so it may see
// either error; at least one of them timed out.
TEST(KeyedSwitchdErrors, WrongSecretIsABoundedErrorAndNothingOfItsIsSummed) {
  constexpr uint16_t kJob = 43;
  KeyedSwitch sw({"--require-job-keys", "1"});
  ASSERT_NE(sw.port(), 0);
  sw.InstallKey(kJob, p::SecMode::kMac, Secret(3));
  std::vector<Rank> ranks = Job(kJob, 2, p::SecMode::kMac, Secret(3), 1, 1000, false, 9);
  ranks[1].secret = Secret(4);
  RunRanks(ranks, sw.port(), /*progress_timeout_ms=*/1500);
  int timed_out = 0;
  for (const Rank& x : ranks) {
    SCOPED_TRACE("rank " + std::to_string(x.rank));
    EXPECT_TRUE(x.status.code() == StatusCode::kDeadlineExceeded ||
                x.status.code() == StatusCode::kAborted)
        << x.status.ToString();
    timed_out += x.status.code() == StatusCode::kDeadlineExceeded;
    EXPECT_LT(x.took, std::chrono::seconds(8));
  }
  EXPECT_GE(timed_out, 1) << "no rank reached its progress timeout";
  const auto counters = sw.sw->Stop();
  EXPECT_TRUE(ranks[1].status.message().find("another secret") != std::string::npos)
      << ranks[1].status.ToString();
  EXPECT_GE(counters.at("joins_unproven"), 1u);
  EXPECT_EQ(counters.at("drop_forged"), 0u) << "the rank that cannot prove never joined";
  EXPECT_EQ(counters.at("results"), 0u);
  const std::string out = sw.sw->Output();
  for (uint8_t s : {3, 4}) EXPECT_EQ(out.find(Hex(Secret(s))), std::string::npos) << out;
}

// Ranks that run another mode than the job's key: each fails its join at once with a message
// naming both (before the challenge said the mode, they joined and had every data packet dropped
// as cross-job until their progress timeout). The other rank, in the key's mode, gets a bounded
// error too: the job cannot start without them.
TEST(KeyedSwitchdErrors, ARankOfAnotherModeFailsItsJoinNamingBoth) {
  constexpr uint16_t kJob = 56;
  KeyedSwitch sw({});
  ASSERT_NE(sw.port(), 0);
  sw.InstallKey(kJob, p::SecMode::kMacEncrypt, Secret(3));
  std::vector<Rank> ranks = Job(kJob, 2, p::SecMode::kMac, Secret(3), 1, 1000, false, 11);
  ranks[0].mode = p::SecMode::kMacEncrypt;
  for (Rank& x : ranks) x.join_timeout_ms = 2000;
  RunRanks(ranks, sw.port(), 1500);
  EXPECT_EQ(ranks[1].status.code(), StatusCode::kFailedPrecondition) << ranks[1].status.ToString();
  EXPECT_NE(ranks[1].status.message().find("key in mode mac_encrypt, but this worker runs it mac"),
            std::string::npos)
      << ranks[1].status.ToString();
  EXPECT_LT(ranks[1].joined_in, std::chrono::seconds(1)) << "at the challenge, not at a timeout";
  EXPECT_FALSE(ranks[0].status.ok());
  EXPECT_LT(ranks[0].joined_in, std::chrono::seconds(8));
  const auto counters = sw.sw->Stop();
  EXPECT_EQ(counters.at("drop_cross_job"), 0u) << "no data of the wrong mode was ever sent";
}

// A launcher's config for the switch on loopback at `port` (InstallJobKey's: a keyed `sec`).
CommConfig Launcher(uint16_t port, const std::string& sec, int join_timeout_ms) {
  CommConfig c;
  c.switch_host = "127.0.0.1";
  c.switch_port = port;
  c.sec = sec;
  c.join_timeout_ms = join_timeout_ms;
  return c;
}

// The launcher's side (host/job_alloc.h): rank 0 makes a fresh secret and installs it over the
// admin channel (a wrong admin secret is a bounded error that names it); the ranks then join with
// it, proving it, and their sums agree exactly.
TEST(KeyedSwitchdLauncher, MakeJobSecretAndInstallJobKeyThenTheJobRuns) {
  constexpr uint16_t kJob = 44;
  KeyedSwitch sw({"--require-job-keys", "1"});
  ASSERT_NE(sw.port(), 0);
  auto secret = MakeJobSecret();
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  EXPECT_EQ(secret->size(), 32u);
  auto another = MakeJobSecret();
  ASSERT_TRUE(another.ok());
  EXPECT_FALSE(
      std::equal(secret->bytes().begin(), secret->bytes().end(), another->bytes().begin()));
  CommConfig c = Launcher(sw.port(), "mac", 1000);
  const auto t0 = Clock::now();
  const Status wrong = InstallJobKey(c, kJob, Secret(201), *secret);
  EXPECT_EQ(wrong.code(), StatusCode::kDeadlineExceeded) << wrong.ToString();
  EXPECT_NE(wrong.message().find("admin secret"), std::string::npos) << wrong.ToString();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  c.sec = "crc";
  EXPECT_EQ(InstallJobKey(c, kJob, kAdmin, *secret).code(), StatusCode::kInvalidArgument);
  c.sec = "mac";
  const Status ok = InstallJobKey(c, kJob, kAdmin, *secret);
  ASSERT_TRUE(ok.ok()) << ok.ToString();

  const std::vector<uint8_t> bytes(secret->bytes().begin(), secret->bytes().end());
  std::vector<Rank> ranks = Job(kJob, 2, p::SecMode::kMac, bytes, 2, 3000, false, 13);
  RunRanks(ranks, sw.port());
  for (const Rank& x : ranks) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
  for (size_t k = 0; k < ranks[0].f.size(); ++k) {
    EXPECT_EQ(0, std::memcmp(ranks[0].f[k].data(), ranks[1].f[k].data(),
                             ranks[0].f[k].size() * sizeof(float)));
    EXPECT_EQ(ranks[0].i[k], ranks[1].i[k]);
  }
  const auto counters = sw.sw->Stop();
  EXPECT_EQ(counters.at("keys_installed"), 1u);
  EXPECT_GE(counters.at("admin_forged"), 1u);
  EXPECT_GE(counters.at("joins_proven"), 2u);  // a rank waiting for the other resends its proof
  EXPECT_EQ(counters.at("joins_unauthorized"), 0u);
}

// A mac_encrypt job through the RTL core (ina-rtlsim), flat and through an ina-switchd leaf that
// passes keys on to it: InstallJobKey installs the key at the core (acked), and the job's
// all-reduces are exact, the core decrypting the workers' data and encrypting its results
// (ina_gcm_ctr; docs/security.md, "The RTL"). Through the leaf, the leaf's engine sees the job
// CRC-only and the core is its spine's engine.
TEST(KeyedSwitchdLauncher, AMacEncryptJobRunsOnTheRtlCoreFlatAndThroughALeaf) {
#ifndef INA_RTLSIM_BIN
  GTEST_SKIP() << "ina-rtlsim is not built (no Verilator)";
#else
  AdminKeyFile admin(kAdmin);
  test::SwitchProcess spine({"--port", "0", "--admin-key-file", admin.path()}, INA_RTLSIM_BIN);
  ASSERT_TRUE(spine.ok()) << spine.Output();
  test::SwitchProcess leaf({"--port", "0", "--admin-key-file", admin.path(), "--upstream",
                            "127.0.0.1:" + std::to_string(spine.port()),
                            "--upstream-admin-key-file", admin.path()});
  ASSERT_TRUE(leaf.ok()) << leaf.Output();
  auto secret = MakeJobSecret();
  ASSERT_TRUE(secret.ok());
  const std::vector<uint8_t> bytes(secret->bytes().begin(), secret->bytes().end());
  uint16_t job = 46;
  for (const uint16_t port : {spine.port(), leaf.port()}) {
    SCOPED_TRACE(port == spine.port() ? "flat" : "through the leaf");
    const Status ok = InstallJobKey(Launcher(port, "mac_encrypt", 20000), job, kAdmin, *secret);
    ASSERT_TRUE(ok.ok()) << ok.ToString();
    std::vector<Rank> ranks = Job(job, 2, p::SecMode::kMacEncrypt, bytes, 2, 3000, true, job);
    const std::vector<Rank> inputs = ranks;
    RunRanks(ranks, port, 30000);
    for (const Rank& x : ranks) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
    ExpectExact(ranks, inputs);
    ++job;
  }
  const auto l = leaf.Stop();
  EXPECT_EQ(l.at("leaf_up_key_acks"), 1u);
  const auto s = spine.Stop();
  EXPECT_EQ(s.at("keys_installed"), 2u) << "the launcher's, and the leaf's";
  EXPECT_EQ(s.at("admin_refused"), 0u);
  EXPECT_EQ(s.at("drop_forged"), 0u);
  EXPECT_GE(s.at("results"), 4u);
#endif
}

// One keyed job on every switch core (`--cores 2 --core-ports 1`, lanes on switch cores): each
// core holds its share of the job as a job of its own, with a key of its own, so InstallJobKey
// installs the secret at every core. A key at core 0 only (a launcher that ignores the job's
// switch_cores) leaves core 1 refusing the job's JOINs, a bounded error on every rank.
TEST(KeyedSwitchdLauncher, AKeyedJobOnEverySwitchCoreGetsItsKeyAtEachCore) {
  constexpr uint16_t kJob = 45, kCoreZeroOnly = 46, kAsked = 47;
  KeyedSwitch sw({"--require-job-keys", "1", "--cores", "2", "--core-ports", "1"});
  ASSERT_NE(sw.port(), 0);
  auto secret = MakeJobSecret();
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  CommConfig c = Launcher(sw.port(), "mac", 3000);
  c.progress_threads = 2;
  c.switch_cores = 2;
  const Status ok = InstallJobKey(c, kJob, kAdmin, *secret);
  ASSERT_TRUE(ok.ok()) << ok.ToString();

  const std::vector<uint8_t> bytes(secret->bytes().begin(), secret->bytes().end());
  std::vector<Rank> ranks = Job(kJob, 2, p::SecMode::kMac, bytes, 2, 3000, true, 17);
  for (Rank& x : ranks) x.lanes = x.cores = 2;
  const std::vector<Rank> inputs = ranks;
  RunRanks(ranks, sw.port());
  for (const Rank& x : ranks) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
  ExpectExact(ranks, inputs);

  // A launcher that does not know the cores either (switch_cores auto): it asks the switch and
  // installs the key at both.
  c.progress_threads = 1;
  c.switch_cores = CommConfig::kSwitchCoresAuto;
  ASSERT_TRUE(InstallJobKey(c, kAsked, kAdmin, *secret).ok());
  std::vector<Rank> asked = Job(kAsked, 2, p::SecMode::kMac, bytes, 2, 3000, true, 19);
  for (Rank& x : asked) x.lanes = x.cores = 2;
  const std::vector<Rank> asked_inputs = asked;
  RunRanks(asked, sw.port());
  for (const Rank& x : asked) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
  ExpectExact(asked, asked_inputs);

  // The same job shape with its key at core 0 only.
  c.progress_threads = 1;
  c.switch_cores = 1;
  ASSERT_TRUE(InstallJobKey(c, kCoreZeroOnly, kAdmin, *secret).ok());
  std::vector<Rank> half = Job(kCoreZeroOnly, 2, p::SecMode::kMac, bytes, 1, 3000, true, 18);
  for (Rank& x : half) x.lanes = x.cores = 2;
  const auto t0 = Clock::now();
  RunRanks(half, sw.port(), 3000);
  for (const Rank& x : half) {
    EXPECT_FALSE(x.status.ok()) << "rank " << x.rank << " ran with core 1 keyless";
    EXPECT_NE(x.status.message().find("unauthorized"), std::string::npos) << x.status.ToString();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(15));

  const auto counters = sw.sw->Stop();
  EXPECT_EQ(counters.at("keys_installed"), 5u);  // kJob, kAsked at both cores, kCoreZeroOnly at 0
  EXPECT_GE(counters.at("joins_proven"), 8u);    // kJob, kAsked: 2 ranks x 2 cores
  EXPECT_GE(counters.at("joins_unauthorized"), 2u);  // kCoreZeroOnly's ranks at core 1
}

// Installs `secret` as mac job `job`'s key at both cores of the switch at `port` (--cores 2
// --core-ports 1), as a launcher of workers with lanes on 2 switch cores does.
void InstallMacKeyAtTwoCores(uint16_t port, uint16_t job, const std::vector<uint8_t>& secret) {
  CommConfig c;
  c.switch_host = "127.0.0.1";
  c.switch_port = port;
  c.sec = "mac";
  c.progress_threads = 2;
  c.switch_cores = 2;
  const Status s = InstallJobKey(c, job, kAdmin, JobSecret(secret));
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// A CRC-only job `job` of one rank and one lane granted 6 slots of the switch core at `port` (so
// that core's other jobs get less than another core's); null, and a test failure, if not.
std::unique_ptr<Communicator> HoldSixSlots(uint16_t port, uint16_t job) {
  CommConfig h;
  h.switch_port = port;
  h.job_id = job;
  h.world_size = 1;
  h.k = 256;
  h.window = 6;
  auto holder = Communicator::Create(h);
  EXPECT_TRUE(holder.ok()) << holder.status().ToString();
  if (!holder.ok()) return nullptr;
  EXPECT_EQ((*holder)->window(), 6);
  return std::move(*holder);
}

// Keyed lanes on switch cores that grant different windows (CoreLanes'
// CoresGrantingDifferentWindowsAgreeOnTheLeast is the CRC-only case): every re-join asking less
// is a new grant of that core and a new generation of its traffic keys, so each lane's keys keep
// in step with its own core's, also when the cores have made different numbers of grants.
// The job asks 8 slots, 4 of each core. A CRC-only job of one lane holds 6 of core 0's 8 slots
// (--min-window 2): core 0 grants the job 2, core 1 4, and the lanes on core 1 re-join asking 2.
// It leaves after the first call; at that grant's end core 0 grants 4 and core 1 2, and the lanes
// on core 0 re-join asking 2.
TEST(KeyedSwitchdLauncher, KeyedLanesOnCoresGrantingDifferentWindowsStayInStep) {
  constexpr uint16_t kJob = 48, kHolder = 49;
  KeyedSwitch sw({"--cores", "2", "--core-ports", "1", "--slots", "16", "--lease-calls", "1",
                  "--min-window", "2"});
  ASSERT_NE(sw.port(), 0);
  const std::vector<uint8_t> bytes = Secret(5);
  ASSERT_NO_FATAL_FAILURE(InstallMacKeyAtTwoCores(sw.port(), kJob, bytes));

  auto holder = HoldSixSlots(sw.port(), kHolder);  // core 0
  ASSERT_NE(holder, nullptr);

  std::vector<Rank> ranks = Job(kJob, 3, p::SecMode::kMac, bytes, 3, 3000, true, 23);
  for (Rank& x : ranks) x.lanes = x.cores = 2;
  const std::vector<Rank> inputs = ranks;
  RunRanks(ranks, sw.port(), 10000, [&](size_t call) {
    if (call == 0) holder.reset();
  });
  for (const Rank& x : ranks) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
  ExpectExact(ranks, inputs);

  const auto counters = sw.sw->Stop();
  // Six all-reduce calls a rank (a float and an int32 each step): lease re-joins before five of
  // them, every lane (5 x 3 x 2); asking less: core 1's lanes at the join, core 0's before the
  // third call (3 + 3).
  EXPECT_EQ(counters.at("rejoins"), 36u);
  EXPECT_EQ(counters.at("drop_forged"), 0u) << "a lane sealed under another grant's keys";
}

// A keyed job idle for longer than the switch's job timeout keeps its job: the idle keep-alive
// JOIN is challenged and proven as any JOIN (docs/protocol.md, "Idle jobs"), on both switch
// cores; the calls after the pause are exact.
TEST(KeyedSwitchdLauncher, AnIdleKeyedJobOutlivesTheJobTimeout) {
  constexpr uint16_t kJob = 50;
  KeyedSwitch sw({"--cores", "2", "--core-ports", "1", "--job-timeout-ms", "1000"});
  ASSERT_NE(sw.port(), 0);
  const std::vector<uint8_t> bytes = Secret(6);
  ASSERT_NO_FATAL_FAILURE(InstallMacKeyAtTwoCores(sw.port(), kJob, bytes));
  std::vector<Rank> ranks = Job(kJob, 2, p::SecMode::kMac, bytes, 2, 3000, true, 29);
  for (Rank& x : ranks) x.lanes = x.cores = 2;
  const std::vector<Rank> inputs = ranks;
  RunRanks(ranks, sw.port(), 10000, [](size_t call) {
    if (call == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  });
  for (const Rank& x : ranks) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
  ExpectExact(ranks, inputs);
  const auto counters = sw.sw->Stop();
  EXPECT_EQ(counters.at("jobs_timed_out"), 0u);
  EXPECT_GE(counters.at("joins_proven"), 8u) << "2 ranks x 2 cores, then the keep-alives";
}

// ---- Keyed jobs through a tree of switches (docs/hierarchy.md, "Keyed jobs") ----

// A spine and two leaves, each with the job's key: 4 ranks, 2 at each leaf, exact sums; every
// hop under its own keys (the leaves open and seal). With the key at the leaves but not at the
// spine, the partials would cross open: every rank gets a bounded error(unauthorized) instead.
class KeyedTree : public ::testing::TestWithParam<p::SecMode> {};

TEST_P(KeyedTree, EveryHopSealedAndTheSumsExact) {
  const p::SecMode mode = GetParam();
  constexpr uint16_t kJob = 51, kSpineKeyless = 52;
  KeyedSwitch spine({});
  ASSERT_NE(spine.port(), 0);
  std::vector<std::unique_ptr<KeyedSwitch>> leaves;
  for (int i = 0; i < 2; ++i) {
    leaves.push_back(std::make_unique<KeyedSwitch>(std::vector<std::string>{
        "--upstream", "127.0.0.1:" + std::to_string(spine.port()), "--leaf-index",
        std::to_string(i), "--leaves", "2", "--job-timeout-ms", "3000"}));
    ASSERT_NE(leaves.back()->port(), 0);
  }
  const std::vector<uint8_t> secret = Secret(7);
  spine.InstallKey(kJob, mode, secret);
  for (auto& leaf : leaves) {
    leaf->InstallKey(kJob, mode, secret);
    leaf->InstallKey(kSpineKeyless, mode, secret);
  }
  std::vector<Rank> ranks = Job(kJob, 4, mode, secret, 3, 256 * 12 + 5, true, 31);
  for (Rank& x : ranks) x.port = leaves[static_cast<size_t>(x.rank / 2)]->port();
  const std::vector<Rank> inputs = ranks;
  RunRanks(ranks, 0);
  for (const Rank& x : ranks) {
    ASSERT_TRUE(x.status.ok()) << "rank " << x.rank << ": " << x.status.ToString();
    EXPECT_EQ(x.stats.results_forged, 0u);
  }
  ExpectExact(ranks, inputs);

  std::vector<Rank> open = Job(kSpineKeyless, 4, mode, secret, 1, 3000, true, 32);
  for (Rank& x : open) x.port = leaves[static_cast<size_t>(x.rank / 2)]->port();
  const auto t0 = Clock::now();
  RunRanks(open, 0, 3000);
  for (const Rank& x : open) {
    EXPECT_FALSE(x.status.ok()) << "rank " << x.rank << " ran with a keyless spine";
    EXPECT_NE(x.status.message().find("unauthorized"), std::string::npos) << x.status.ToString();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(15));

  for (auto& leaf : leaves) {
    const auto c = leaf->sw->Stop();
    EXPECT_GE(c.at("joins_proven"), 4u) << "2 ranks, 2 jobs";
    EXPECT_GE(c.at("leaf_up_proofs"), 1u);
    EXPECT_EQ(c.at("leaf_data_forged"), 0u);
    EXPECT_EQ(c.at("leaf_up_forged"), 0u);
    EXPECT_EQ(c.at("leaf_key_mismatch"), 1u) << "kSpineKeyless";
    EXPECT_EQ(c.at("drop_bad_crc"), 0u) << "nothing keyed reached the engine unopened";
  }
  const auto up = spine.sw->Stop();
  EXPECT_GE(up.at("joins_proven"), 2u) << "both leaves proved the job's JOIN";
  EXPECT_EQ(up.at("drop_forged"), 0u);
  EXPECT_EQ(up.at("drop_cross_job"), 0u);
}

// The same tree with every switch on two cores (--cores 2 --core-ports 1; the key at every core
// of every switch), and the spine's cores granting different windows: a CRC-only job of one lane
// holds 6 of the spine's core 0's 8 slots, so core 0 grants the job 2 and core 1 4. The workers'
// lanes on core 1 re-join their leaves asking 2 (proven, as every JOIN of a keyed job), each
// leaf's core 1 re-joins the spine's (proven too), and every lane then runs under its own core's
// next grant's keys at both hops.
TEST(KeyedTreeOnTwoCores, SpineCoresGrantingDifferentWindowsStayInStep) {
  constexpr uint16_t kJob = 53, kHolder = 54;
  KeyedSwitch spine({"--cores", "2", "--core-ports", "1", "--slots", "16", "--min-window", "2"});
  ASSERT_NE(spine.port(), 0);
  std::vector<std::unique_ptr<KeyedSwitch>> leaves;
  for (int i = 0; i < 2; ++i) {
    leaves.push_back(std::make_unique<KeyedSwitch>(
        std::vector<std::string>{"--cores", "2", "--core-ports", "1", "--upstream",
                                 "127.0.0.1:" + std::to_string(spine.port()), "--leaf-index",
                                 std::to_string(i), "--leaves", "2"}));
    ASSERT_NE(leaves.back()->port(), 0);
  }
  const std::vector<uint8_t> secret = Secret(8);
  ASSERT_NO_FATAL_FAILURE(InstallMacKeyAtTwoCores(spine.port(), kJob, secret));
  for (auto& leaf : leaves) {
    ASSERT_NO_FATAL_FAILURE(InstallMacKeyAtTwoCores(leaf->port(), kJob, secret));
  }
  auto holder = HoldSixSlots(spine.port(), kHolder);  // the spine's core 0
  ASSERT_NE(holder, nullptr);

  std::vector<Rank> ranks = Job(kJob, 4, p::SecMode::kMac, secret, 2, 3000, true, 33);
  for (Rank& x : ranks) {
    x.lanes = x.cores = 2;
    x.port = leaves[static_cast<size_t>(x.rank / 2)]->port();
  }
  const std::vector<Rank> inputs = ranks;
  RunRanks(ranks, 0);
  for (const Rank& x : ranks) {
    ASSERT_TRUE(x.status.ok()) << "rank " << x.rank << ": " << x.status.ToString();
    EXPECT_EQ(x.stats.results_forged, 0u);
  }
  ExpectExact(ranks, inputs);
  holder.reset();
  for (auto& leaf : leaves) {
    const auto c = leaf->sw->Stop();
    EXPECT_EQ(c.at("leaf_data_forged"), 0u);
    EXPECT_EQ(c.at("leaf_up_forged"), 0u);
    EXPECT_EQ(c.at("leaf_key_mismatch"), 0u);
    EXPECT_GE(c.at("leaf_up_proofs"), 3u) << "each core's JOIN, and core 1's re-join";
  }
  const auto up = spine.sw->Stop();
  EXPECT_EQ(up.at("rejoins"), 2u) << "each leaf's core 1, once";
  EXPECT_EQ(up.at("regrants"), 1u);
  EXPECT_EQ(up.at("drop_forged"), 0u) << "a leaf sealed under another grant's keys";
}

// A keyed job through a leaf idle for longer than both switches' job timeout keeps its job: the
// workers' keep-alive JOINs are challenged and proven at the leaf, the leaf's at the spine.
TEST(KeyedTreeIdle, AnIdleKeyedJobOutlivesBothJobTimeouts) {
  constexpr uint16_t kJob = 55;
  KeyedSwitch spine({"--job-timeout-ms", "1000"});
  ASSERT_NE(spine.port(), 0);
  KeyedSwitch leaf({"--job-timeout-ms", "1000", "--upstream",
                    "127.0.0.1:" + std::to_string(spine.port()), "--leaf-index", "0", "--leaves",
                    "1"});
  ASSERT_NE(leaf.port(), 0);
  const std::vector<uint8_t> secret = Secret(9);
  spine.InstallKey(kJob, p::SecMode::kMac, secret);
  leaf.InstallKey(kJob, p::SecMode::kMac, secret);
  std::vector<Rank> ranks = Job(kJob, 2, p::SecMode::kMac, secret, 2, 3000, true, 35);
  const std::vector<Rank> inputs = ranks;
  RunRanks(ranks, leaf.port(), 10000, [](size_t call) {
    if (call == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  });
  for (const Rank& x : ranks) ASSERT_TRUE(x.status.ok()) << x.status.ToString();
  ExpectExact(ranks, inputs);
  const auto l = leaf.sw->Stop();
  EXPECT_EQ(l.at("jobs_timed_out"), 0u);
  EXPECT_GE(l.at("leaf_up_proofs"), 3u) << "the JOIN, then keep-alives";
  const auto s = spine.sw->Stop();
  EXPECT_EQ(s.at("jobs_timed_out"), 0u) << "the spine kept the leaf's job";
  EXPECT_EQ(s.at("jobs_done"), 1u);
}

// Keys passed on through the tree (ina-switchd --upstream-admin-key-file): the job's launcher at
// each leaf installs the key there only, as torch's and NCCL's launchers do at their own switch
// (InstallJobKey); each leaf passes it on to the spine and acknowledges it only once the spine
// has it. The job runs through a spine that requires keys and was given none by hand. A leaf
// given another admin secret for the spine leaves its launcher without an ack: a bounded error.
TEST(KeyedTreeKeysPassedOn, LaunchersAtTheLeavesCoverTheSpine) {
  constexpr uint16_t kJob = 56, kLost = 57;
  KeyedSwitch spine({"--require-job-keys", "1"});
  ASSERT_NE(spine.port(), 0);
  const std::string up = "127.0.0.1:" + std::to_string(spine.port());
  std::vector<std::unique_ptr<KeyedSwitch>> leaves;
  for (int i = 0; i < 2; ++i) {
    leaves.push_back(std::make_unique<KeyedSwitch>(
        std::vector<std::string>{"--upstream", up, "--leaf-index", std::to_string(i), "--leaves",
                                 "2", "--upstream-admin-key-file", spine.admin.path()}));
    ASSERT_NE(leaves.back()->port(), 0);
  }
  auto secret = MakeJobSecret();
  ASSERT_TRUE(secret.ok()) << secret.status().ToString();
  for (auto& leaf : leaves) {
    const Status s =
        InstallJobKey(Launcher(leaf->port(), "mac_encrypt", 3000), kJob, kAdmin, *secret);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  const std::vector<uint8_t> bytes(secret->bytes().begin(), secret->bytes().end());
  std::vector<Rank> ranks = Job(kJob, 4, p::SecMode::kMacEncrypt, bytes, 2, 3000, true, 36);
  for (Rank& x : ranks) x.port = leaves[static_cast<size_t>(x.rank / 2)]->port();
  const std::vector<Rank> inputs = ranks;
  RunRanks(ranks, 0);
  for (const Rank& x : ranks) {
    ASSERT_TRUE(x.status.ok()) << "rank " << x.rank << ": " << x.status.ToString();
  }
  ExpectExact(ranks, inputs);

  AdminKeyFile other(Secret(201));
  KeyedSwitch lost({"--upstream", up, "--leaf-index", "0", "--leaves", "2",
                    "--upstream-admin-key-file", other.path()});
  ASSERT_NE(lost.port(), 0);
  const auto t0 = Clock::now();
  const Status s = InstallJobKey(Launcher(lost.port(), "mac", 1000), kLost, kAdmin, *secret);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("admin secret"), std::string::npos) << s.ToString();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));

  for (auto& leaf : leaves) {
    const auto k = leaf->sw->Stop();
    EXPECT_GE(k.at("leaf_up_keys"), 1u);
    EXPECT_EQ(k.at("leaf_up_key_acks"), 1u) << "one launcher, acknowledged once";
    EXPECT_EQ(k.at("leaf_key_mismatch"), 0u);
  }
  const auto l = lost.sw->Stop();
  EXPECT_GE(l.at("leaf_up_keys"), 1u);
  EXPECT_EQ(l.at("leaf_up_key_acks"), 0u);
  const auto sp = spine.sw->Stop();
  EXPECT_EQ(sp.at("keys_installed"), 2u) << "one from each leaf: the same key, taken twice";
  EXPECT_EQ(sp.at("joins_unauthorized"), 0u);
  EXPECT_GE(sp.at("joins_proven"), 2u) << "both leaves proved the job's JOIN";
  EXPECT_GE(sp.at("admin_forged"), 1u) << "the lost leaf's, under another admin secret";
}

// What a rank at another leaf than its launcher's does (torch, NCCL): the key at its own switch
// with INA_ADMIN_KEY; without it, a FailedPrecondition that names it and who needed it.
TEST(KeyedTreeKeysPassedOn, ARankAtAnotherSwitchInstallsWithItsAdminKey) {
  constexpr uint16_t kJob = 58;
  KeyedSwitch sw({"--require-job-keys", "1"});
  ASSERT_NE(sw.port(), 0);
  const JobSecret secret(Secret(10));
  const CommConfig c = Launcher(sw.port(), "mac", 2000);
  unsetenv("INA_ADMIN_KEY");
  const Status none = InstallJobKeyAtOwnSwitch(c, kJob, secret, "rank 2");
  EXPECT_EQ(none.code(), StatusCode::kFailedPrecondition) << none.ToString();
  EXPECT_NE(none.message().find("INA_ADMIN_KEY"), std::string::npos) << none.ToString();
  EXPECT_NE(none.message().find("rank 2 (at 127.0.0.1:" + std::to_string(sw.port())),
            std::string::npos)
      << none.ToString();
  setenv("INA_ADMIN_KEY", sw.admin.path().c_str(), 1);
  const Status ok = InstallJobKeyAtOwnSwitch(c, kJob, secret, "rank 2");
  unsetenv("INA_ADMIN_KEY");
  EXPECT_TRUE(ok.ok()) << ok.ToString();
  const auto counters = sw.sw->Stop();
  EXPECT_EQ(counters.at("keys_installed"), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, KeyedTree,
                         ::testing::Values(p::SecMode::kMac, p::SecMode::kMacEncrypt),
                         [](const auto& info) { return std::string(ModeName(info.param)); });

// ---- Attacks through the proxy ----

// Rewrites with the checksum recomputed: every 40th result to job kJob (exp + 1, next_exp + 1,
// a payload byte, in turn) and every 60th data packet from it (next_exp + 1 or a payload byte).
// In crc mode only header fields: a rewritten payload still sums there, which is what the MAC is
// for (docs/security.md).
struct Damage {
  uint16_t job;
  bool payload;
  int down_seen = 0, up_seen = 0;

  bool Down(uint8_t* pkt, size_t len, uint16_t job_of) {
    if (job_of != job || p::GetType(pkt) != p::MsgType::kResult) return false;
    if (++down_seen % 40 != 0) return false;
    switch ((down_seen / 40) % (payload ? 3 : 2)) {
      case 0:
        if (p::GetExp(pkt) == p::kExpNone) return false;
        p::SetExp(pkt, static_cast<uint8_t>(p::GetExp(pkt) + 1));
        return true;
      case 1:
        if (p::GetNextExp(pkt) == p::kExpNone) return false;
        p::SetNextExp(pkt, static_cast<uint8_t>(p::GetNextExp(pkt) + 1));
        return true;
      default:
        if (len < p::kHeaderBytes + 32) return false;
        pkt[p::kHeaderBytes + 7] ^= 0x10;
        return true;
    }
  }
  bool Up(uint8_t* pkt, size_t len, uint16_t job_of) {
    if (job_of != job || p::GetType(pkt) != p::MsgType::kData) return false;
    if (++up_seen % 60 != 0) return false;
    if (payload && (up_seen / 60) % 2 == 0 && len >= p::kHeaderBytes + 32) {
      pkt[p::kHeaderBytes + 5] ^= 0x01;
      return true;
    }
    if (p::GetNextExp(pkt) == p::kExpNone) return false;
    p::SetNextExp(pkt, static_cast<uint8_t>(p::GetNextExp(pkt) + 1));
    return true;
  }
};

class KeyedAttack : public ::testing::TestWithParam<p::SecMode> {};

TEST_P(KeyedAttack, RewritesNeverGiveAWrongResultAndWithTheMacTheJobCompletesExact) {
  const p::SecMode mode = GetParam();
  const bool keyed = mode != p::SecMode::kCrc;
  constexpr uint16_t kJob = 44, kNeighbour = 45;
  constexpr size_t kCalls = 3, kN = 256 * 8 * 5 + 77;
  KeyedSwitch sw({});
  ASSERT_NE(sw.port(), 0);
  const auto secret = Secret(6);
  if (keyed) sw.InstallKey(kJob, mode, secret);
  Damage damage{kJob, keyed};
  RewriteProxy proxy(
      sw.port(),
      [&](uint8_t* b, size_t len, uint16_t job, uint16_t) { return damage.Down(b, len, job); },
      [&](uint8_t* b, size_t len, uint16_t job, uint16_t) { return damage.Up(b, len, job); });
  std::vector<Rank> all = Job(kJob, 4, mode, secret, kCalls, kN, true, 11);
  const std::vector<Rank> inputs_a = all;
  std::vector<Rank> neighbour = Job(kNeighbour, 2, p::SecMode::kCrc, {}, kCalls, kN, true, 12);
  const std::vector<Rank> inputs_b = neighbour;
  all.insert(all.end(), neighbour.begin(), neighbour.end());
  RunRanks(all, proxy.port());
  // crc: the first rewritten next_exp ends the job (rank_mismatch); keyed: the job goes on.
  EXPECT_GE(proxy.rewritten(), keyed ? 10u : 1u) << "the attack hardly happened";
  const std::vector<Rank> a(all.begin(), all.begin() + 4), b(all.begin() + 4, all.end());
  ExpectExact(a, inputs_a);  // no rank OK with a wrong result
  ExpectExact(b, inputs_b);
  uint64_t forged = 0;
  for (const Rank& x : all) {
    std::printf("job %u rank %d: %s, %llu forged results dropped, %llu retransmissions\n", x.job,
                x.rank, x.status.ToString().c_str(),
                static_cast<unsigned long long>(x.stats.results_forged),
                static_cast<unsigned long long>(x.stats.retransmissions));
    if (x.job == kNeighbour || keyed) {
      EXPECT_TRUE(x.status.ok()) << x.status.ToString();
    }
    if (x.job == kJob) forged += x.stats.results_forged;
  }
  const auto counters = sw.sw->Stop();
  if (keyed) {
    EXPECT_GE(forged, 1u);
    EXPECT_GE(counters.at("drop_forged"), 1u);
    EXPECT_EQ(counters.at("drop_mismatch"), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, KeyedAttack,
                         ::testing::Values(p::SecMode::kCrc, p::SecMode::kMac,
                                           p::SecMode::kMacEncrypt),
                         [](const ::testing::TestParamInfo<p::SecMode>& info) {
                           return std::string(ModeName(info.param));
                         });

// Data captured in the job's first grant and sent again, from the members' own addresses, in a
// later grant (every call is a grant: --lease-calls 1): another key, so every copy that reaches
// the tag check is dropped as forged, and the rest as stale; the same packets with a changed
// payload from the members' addresses, and from another socket (a spoofed member address), are
// dropped too. Nothing of them is summed: the job stays exact.
TEST(KeyedAttackReplay, ReplayedAndSpoofedDataAreCountedAndDropped) {
  constexpr uint16_t kJob = 46;
  constexpr size_t kCalls = 4, kN = 256 * 8 * 2 + 9;
  KeyedSwitch sw({"--lease-calls", "1"});
  ASSERT_NE(sw.port(), 0);
  const auto secret = Secret(8);
  sw.InstallKey(kJob, p::SecMode::kMac, secret);
  RewriteProxy proxy(sw.port(), nullptr);
  proxy.Capture(kJob, true);
  std::vector<Rank> ranks = Job(kJob, 2, p::SecMode::kMac, secret, kCalls, kN, true, 13);
  const std::vector<Rank> inputs = ranks;
  size_t replayed = 0, changed = 0, spoofed = 0;
  RunRanks(ranks, proxy.port(), 10000, [&](size_t call) {
    if (call == 0) proxy.Capture(kJob, false);
    if (call == 1) replayed = proxy.ReplayCaptured();
    if (call == 2) {
      changed = proxy.ReplayCaptured([](std::vector<uint8_t>& b) {
        if (b.size() > p::kHeaderBytes + p::kTagBytes) b[p::kHeaderBytes] ^= 0x01;
      });
      test::Worker spoofer(sw.port());  // another address claiming the members' ranks
      proxy.ReplayCaptured([&](std::vector<uint8_t>& b) {
        spoofer.Send(b);
        ++spoofed;
        b.clear();  // not from the member's address this time
      });
    }
  });
  EXPECT_GT(replayed, 10u);
  EXPECT_EQ(changed, replayed);
  EXPECT_EQ(spoofed, replayed);
  for (const Rank& x : ranks) EXPECT_TRUE(x.status.ok()) << x.status.ToString();
  ExpectExact(ranks, inputs);
  const auto counters = sw.sw->Stop();
  std::printf(
      "replayed %zu x 2, spoofed %zu: drop_forged %llu drop_stale %llu drop_early %llu "
      "duplicates %llu drop_foreign_src %llu\n",
      replayed, spoofed, static_cast<unsigned long long>(counters.at("drop_forged")),
      static_cast<unsigned long long>(counters.at("drop_stale")),
      static_cast<unsigned long long>(counters.at("drop_early")),
      static_cast<unsigned long long>(counters.at("duplicates")),
      static_cast<unsigned long long>(counters.at("drop_foreign_src")));
  // The replayed copies from the members' addresses fail the tag (another grant's key); the
  // spoofed ones from another address are dropped by the switch's source check before the tag is
  // opened (drop_foreign_src) while the job holds its grant, and as stale or forged between grants.
  EXPECT_GE(counters.at("drop_forged"), replayed);
  EXPECT_GT(counters.at("drop_foreign_src"), 0u);
  EXPECT_GE(counters.at("drop_forged") + counters.at("drop_stale") + counters.at("drop_early") +
                counters.at("duplicates") + counters.at("drop_foreign_src"),
            3 * replayed);
}

}  // namespace
}  // namespace ina::host
