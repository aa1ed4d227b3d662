// CommConfig: validation and INA_* environment overrides.
#include "ina/host/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ina::host {
namespace {

class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvVar() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST(CommConfig, DefaultsAreValid) {
  CommConfig c;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  EXPECT_NE(c.ToString().find("switch=127.0.0.1:47000"), std::string::npos) << c.ToString();
  EXPECT_NE(c.ToString().find("window=256"), std::string::npos) << c.ToString();
}

TEST(CommConfig, ValidateRejectsEachBadField) {
  struct Case {
    const char* what;
    void (*mutate)(CommConfig&);
  };
  const Case cases[] = {
      {"switch_host", [](CommConfig& c) { c.switch_host = ""; }},
      {"switch_port", [](CommConfig& c) { c.switch_port = 0; }},
      {"world_size", [](CommConfig& c) { c.world_size = 0; }},
      {"world_size", [](CommConfig& c) { c.world_size = 65; }},
      {"rank",
       [](CommConfig& c) {
         c.world_size = 4;
         c.rank = 4;
       }},
      {"k", [](CommConfig& c) { c.k = 128; }},
      {"window", [](CommConfig& c) { c.window = 0; }},
      {"window", [](CommConfig& c) { c.window = CommConfig::kMaxWindow + 1; }},
      {"join_timeout_ms", [](CommConfig& c) { c.join_timeout_ms = 0; }},
      {"progress_timeout_ms", [](CommConfig& c) { c.progress_timeout_ms = -1; }},
      {"rto_min_us", [](CommConfig& c) { c.rto_min_us = 0; }},
      {"rto_max_us", [](CommConfig& c) { c.rto_max_us = c.rto_min_us - 1; }},
      {"rto_initial_us", [](CommConfig& c) { c.rto_initial_us = c.rto_max_us + 1; }},
      {"transport", [](CommConfig& c) { c.transport = ""; }},
      {"progress_threads", [](CommConfig& c) { c.progress_threads = 0; }},
      {"progress_threads",
       [](CommConfig& c) { c.progress_threads = CommConfig::kMaxProgressThreads + 1; }},
      {"progress_threads",
       [](CommConfig& c) {
         c.progress_threads = 2;
         c.transport = "verbs";
       }},
      {"port per lane",  // dpdk lanes: one name is not a port per lane
       [](CommConfig& c) {
         c.progress_threads = 2;
         c.transport = "dpdk";
         c.dpdk.port = "net_memif0";
       }},
      {"port per lane",
       [](CommConfig& c) {
         c.progress_threads = 3;
         c.transport = "dpdk";
         c.dpdk.port = "net_memif0,,net_memif2";
       }},
      {"past 65535",
       [](CommConfig& c) {
         c.progress_threads = 2;
         c.transport = "dpdk";
         c.dpdk.local_port = 65535;
       }},
      {"quant", [](CommConfig& c) { c.quant = "sse9"; }},
      {"socket_buffer_bytes", [](CommConfig& c) { c.socket_buffer_bytes = -1; }},
      {"staging_bytes", [](CommConfig& c) { c.staging_bytes = CommConfig::kMaxStagingBytes + 1; }},
  };
  for (const auto& tc : cases) {
    CommConfig c;
    tc.mutate(c);
    Status s = c.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << tc.what;
    EXPECT_NE(s.message().find(tc.what), std::string::npos) << s.message();
  }
  CommConfig ok;
  ok.world_size = 64;
  ok.rank = 63;
  ok.k = 64;
  ok.window = 1;
  ok.progress_threads = CommConfig::kMaxProgressThreads;
  EXPECT_TRUE(ok.Validate().ok()) << ok.Validate().ToString();
  EXPECT_NE(ok.ToString().find("progress_threads=16"), std::string::npos) << ok.ToString();
}

TEST(CommConfig, DpdkLanePortsAreEmptyOrOneNamePerLane) {
  EXPECT_EQ(DpdkLanePorts("", 3), (std::vector<std::string>{"", "", ""}));
  EXPECT_EQ(DpdkLanePorts("a,b", 2), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(DpdkLanePorts("net_memif0", 1), (std::vector<std::string>{"net_memif0"}));
  EXPECT_TRUE(DpdkLanePorts("a,b", 3).empty());
  EXPECT_TRUE(DpdkLanePorts("a,", 2).empty());
  EXPECT_TRUE(DpdkLanePorts(",", 2).empty());
  CommConfig c;
  c.transport = "dpdk";
  c.progress_threads = 2;
  c.dpdk.local_port = 40000;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();  // port empty: probed order
  c.dpdk.port = "net_memif3,net_memif5";
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
}

// Lanes on switch cores over DPDK are the queues of one port: one name or none, not one per lane.
TEST(CommConfig, SwitchCoresOverDpdkTakeOnePort) {
  CommConfig c;
  c.transport = "dpdk";
  c.progress_threads = 2;
  c.switch_cores = 2;
  c.dpdk.local_port = 40000;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  c.dpdk.port = "net_memif0";
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  c.dpdk.port = "net_memif0,net_memif1";
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.Validate().ToString().find("takes one port"), std::string::npos)
      << c.Validate().ToString();
  c.dpdk.port = "";
  c.transport = "verbs";
  c.progress_threads = 1;
  c.switch_cores = 1;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  c.progress_threads = 2;
  c.switch_cores = 2;
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
}

TEST(CommConfig, EnvOverridesApply) {
  EnvVar a("INA_SWITCH", "10.0.0.7:4711");
  EnvVar b("INA_JOB", "42");
  EnvVar c("INA_RANK", "3");
  EnvVar d("INA_WORLD", "8");
  EnvVar e("INA_K", "64");
  EnvVar f("INA_WINDOW", "32");
  EnvVar g("INA_JOIN_TIMEOUT_MS", "1234");
  EnvVar h("INA_PROGRESS_TIMEOUT_MS", "987");
  EnvVar i("INA_TRANSPORT", "dpdk");
  CommConfig base;
  base.rto_min_us = 700;  // INA_RTO_MIN_US unset: kept
  auto r = CommConfig::FromEnv(base);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->switch_host, "10.0.0.7");
  EXPECT_EQ(r->switch_port, 4711);
  EXPECT_EQ(r->job_id, 42);
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world_size, 8);
  EXPECT_EQ(r->k, 64);
  EXPECT_EQ(r->window, 32);
  EXPECT_EQ(r->join_timeout_ms, 1234);
  EXPECT_EQ(r->progress_timeout_ms, 987);
  EXPECT_EQ(r->transport, "dpdk");
  EXPECT_EQ(r->rto_min_us, 700);
}

TEST(CommConfig, ProgressThreadsFromEnv) {
  EXPECT_EQ(CommConfig{}.progress_threads, 1);
  {
    EnvVar a("INA_PROGRESS_THREADS", "4");
    auto r = CommConfig::FromEnv(CommConfig{});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->progress_threads, 4);
    EXPECT_TRUE(r->Validate().ok());
  }
  {
    EnvVar a("INA_PROGRESS_THREADS", "two");
    auto r = CommConfig::FromEnv(CommConfig{});
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("INA_PROGRESS_THREADS"), std::string::npos);
  }
  {
    EnvVar a("INA_PROGRESS_THREADS", "17");  // parses; Validate names the range
    auto r = CommConfig::FromEnv(CommConfig{});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->Validate().code(), StatusCode::kInvalidArgument);
  }
}

TEST(CommConfig, RtoEnvOverridesApplyAndValidate) {
  EnvVar a("INA_RTO_MIN_US", "20000");
  EnvVar b("INA_RTO_INITIAL_US", "30000");
  EnvVar c("INA_RTO_MAX_US", "400000");
  auto r = CommConfig::FromEnv(CommConfig{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rto_min_us, 20000);
  EXPECT_EQ(r->rto_initial_us, 30000);
  EXPECT_EQ(r->rto_max_us, 400000);
  EXPECT_TRUE(r->Validate().ok());
  // A floor above the default first value is caught by Validate, not silently reordered.
  EnvVar d("INA_RTO_INITIAL_US", "5000");
  auto bad = CommConfig::FromEnv(CommConfig{});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->Validate().code(), StatusCode::kInvalidArgument);
  EnvVar e("INA_RTO_MIN_US", "-1");
  EXPECT_EQ(CommConfig::FromEnv(CommConfig{}).status().code(), StatusCode::kInvalidArgument);
}

TEST(CommConfig, UnsetEnvKeepsBase) {
  CommConfig base;
  base.rank = 1;
  base.world_size = 2;
  auto r = CommConfig::FromEnv(base);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->world_size, 2);
  EXPECT_EQ(r->switch_port, 47000);
}

// The tunables that used to be read behind the program's back (INA_QUANT by the quantizer,
// INA_UDP_GSO by the UDP port) are CommConfig fields now, set from the environment by FromEnv only,
// and printed by ToString.
TEST(CommConfig, QuantGsoAndSocketBufferFromEnv) {
  CommConfig d;
  EXPECT_EQ(d.quant, "auto");
  EXPECT_TRUE(d.udp_gso);
  EXPECT_NE(d.ToString().find("udp_gso=1 quant=auto"), std::string::npos) << d.ToString();
  EnvVar a("INA_QUANT", "scalar");
  EnvVar b("INA_UDP_GSO", "0");
  EnvVar c("INA_SOCKET_BUFFER_BYTES", "65536");
  auto r = CommConfig::FromEnv(CommConfig{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->quant, "scalar");
  EXPECT_FALSE(r->udp_gso);
  EXPECT_EQ(r->socket_buffer_bytes, 65536);
  EXPECT_TRUE(r->Validate().ok());
  EXPECT_NE(r->ToString().find("socket_buffer_bytes=65536 udp_gso=0 quant=scalar"),
            std::string::npos)
      << r->ToString();
}

// INA_STAGING_BYTES: parsed with the one integer parser, bounded by the largest call's bytes.
TEST(CommConfig, StagingBytesFromEnv) {
  EXPECT_EQ(CommConfig{}.staging_bytes, 0u);
  {
    EnvVar s("INA_STAGING_BYTES", "67108864");
    auto r = CommConfig::FromEnv(CommConfig{});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->staging_bytes, uint64_t{64} << 20);
    EXPECT_TRUE(r->Validate().ok());
    EXPECT_NE(r->ToString().find("staging_bytes=67108864"), std::string::npos) << r->ToString();
  }
  for (const char* bad : {"-1", "lots", "17179869181"}) {
    EnvVar s("INA_STAGING_BYTES", bad);
    auto r = CommConfig::FromEnv(CommConfig{});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().ToString().find("INA_STAGING_BYTES"), std::string::npos)
        << r.status().ToString();
  }
}

TEST(CommConfig, VerbsSettingsFromTheConfigAndTheEnvironment) {
  CommConfig c;
  c.transport = "verbs";
  c.switch_host = "10.0.1.2";
  c.verbs.device = "rxe0";
  c.verbs.gid_index = 1;
  c.verbs.mtu = 4096;
  ASSERT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  EXPECT_NE(c.ToString().find("verbs_device=rxe0 verbs_port=1 verbs_gid_index=1 verbs_mtu=4096"),
            std::string::npos)
      << c.ToString();
  c.verbs.mtu = 1000;  // not a verbs MTU
  EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.Validate().message().find("verbs"), std::string::npos) << c.Validate().ToString();
  c.verbs.mtu = 0;
  c.verbs.remote_qpn = 1;  // the GSI QP
  EXPECT_FALSE(c.Validate().ok());
  // udp ignores the verbs fields (and prints none).
  c.transport = "udp";
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.ToString().find("verbs_"), std::string::npos);

  EnvVar t("INA_TRANSPORT", "verbs");
  EnvVar d("INA_VERBS_DEVICE", "rxe1");
  EnvVar m("INA_VERBS_MTU", "2048");
  auto r = CommConfig::FromEnv(CommConfig{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->transport, "verbs");
  EXPECT_EQ(r->verbs.device, "rxe1");
  EXPECT_EQ(r->verbs.mtu, 2048);
  EXPECT_TRUE(r->Validate().ok()) << r->Validate().ToString();
  EnvVar bad("INA_VERBS_PORT", "x");
  EXPECT_EQ(CommConfig::FromEnv(CommConfig{}).status().code(), StatusCode::kInvalidArgument);
}

TEST(CommConfig, MalformedEnvNamesTheVariable) {
  const std::pair<const char*, const char*> bad[] = {
      {"INA_RANK", "x1"},
      {"INA_RANK", "70000"},
      {"INA_WORLD", "-1"},
      {"INA_K", ""},
      {"INA_JOB", "12abc"},
      {"INA_SWITCH", "nohostport"},
      {"INA_SWITCH", "h:0"},
      {"INA_SWITCH", "h:99999"},
      {"INA_JOIN_TIMEOUT_MS", "1e3"},
      {"INA_PROGRESS_TIMEOUT_MS", "99999999999"},
      {"INA_QUANT", "sse9"},
      {"INA_QUANT", ""},
      {"INA_UDP_GSO", "2"},
      {"INA_UDP_GSO", "yes"},
      {"INA_SOCKET_BUFFER_BYTES", "-1"},
      {"INA_SOCKET_BUFFER_BYTES", "8M"},
  };
  for (const auto& [name, value] : bad) {
    EnvVar v(name, value);
    auto r = CommConfig::FromEnv(CommConfig{});
    ASSERT_FALSE(r.ok()) << name << "=" << value;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().message();
  }
}

// ---- The job secret (docs/security.md): INA_JOB_KEY, INA_JOB_SEC ----

// A file in a fresh temporary directory with `text`, mode `mode`; removed at the end.
class SecretFile {
 public:
  SecretFile(const std::string& text, mode_t mode) {
    char dir[] = "/tmp/ina_job_key_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      ADD_FAILURE() << "mkdtemp";
      return;
    }
    dir_ = dir;
    path_ = dir_ + "/job.key";
    std::ofstream(path_) << text;
    EXPECT_EQ(chmod(path_.c_str(), mode), 0);
  }
  ~SecretFile() {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

constexpr const char* kHex32 = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

TEST(CommConfig, JobKeyFromAFileSetsMacAndIsNeverPrinted) {
  SecretFile f(std::string(kHex32) + "\n", 0600);
  EnvVar key("INA_JOB_KEY", f.path().c_str());
  auto c = CommConfig::FromEnv(CommConfig{});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->sec, "mac");  // a key without INA_JOB_SEC: mac
  ASSERT_EQ(c->job_secret.size(), 32u);
  EXPECT_EQ(c->job_secret.bytes()[1], 0x11);
  EXPECT_TRUE(c->Validate().ok()) << c->Validate().ToString();
  const std::string s = c->ToString();
  EXPECT_NE(s.find("sec=mac job_secret=set"), std::string::npos) << s;
  EXPECT_EQ(s.find("00112233"), std::string::npos) << "the secret was printed: " << s;
  EXPECT_EQ(s.find("ddeeff"), std::string::npos) << "the secret was printed: " << s;
  EnvVar sec("INA_JOB_SEC", "mac_encrypt");
  auto e = CommConfig::FromEnv(CommConfig{});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->sec, "mac_encrypt");
}

TEST(CommConfig, JobKeyFromAnFd) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_EQ(write(fds[1], kHex32, 32), 32);  // 16 bytes, the least
  close(fds[1]);
  const std::string spec = "fd:" + std::to_string(fds[0]);
  auto s = LoadJobSecret(spec);
  close(fds[0]);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->size(), 16u);
  EXPECT_EQ(s->bytes()[15], 0xff);
}

TEST(CommConfig, BadJobKeysGetClearErrors) {
  {
    SecretFile f(kHex32, 0644);
    auto s = LoadJobSecret(f.path());
    EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.status().message().find("chmod 600"), std::string::npos) << s.status().ToString();
  }
  {
    SecretFile f("0011223344556677", 0600);  // 8 bytes
    auto s = LoadJobSecret(f.path());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("32 .. 128 hex digits"), std::string::npos)
        << s.status().ToString();
    EXPECT_EQ(s.status().message().find("0011223344556677"), std::string::npos);
  }
  {
    SecretFile f(std::string(kHex32).replace(3, 1, "g"), 0600);
    auto s = LoadJobSecret(f.path());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message().find("001g"), std::string::npos);
  }
  EXPECT_EQ(LoadJobSecret("/nonexistent/ina.key").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(LoadJobSecret("fd:x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadJobSecret("").status().code(), StatusCode::kInvalidArgument);
  {
    EnvVar sec("INA_JOB_SEC", "gcm");
    auto c = CommConfig::FromEnv(CommConfig{});
    EXPECT_NE(c.status().message().find("INA_JOB_SEC"), std::string::npos) << c.status().ToString();
  }
  {
    EnvVar key("INA_JOB_KEY", "/nonexistent/ina.key");
    auto c = CommConfig::FromEnv(CommConfig{});
    EXPECT_NE(c.status().message().find("INA_JOB_KEY"), std::string::npos) << c.status().ToString();
  }
  // Validate: a keyed mode needs a secret of the right length; a secret needs a keyed mode.
  CommConfig c;
  c.sec = "mac";
  EXPECT_NE(c.Validate().message().find("needs a job secret"), std::string::npos);
  std::vector<uint8_t> eight(8, 1), seventy(70, 1), ok(16, 1);
  c.job_secret = JobSecret(eight);
  EXPECT_FALSE(c.Validate().ok());
  c.job_secret = JobSecret(seventy);
  EXPECT_FALSE(c.Validate().ok());
  c.job_secret = JobSecret(ok);
  EXPECT_TRUE(c.Validate().ok()) << c.Validate().ToString();
  c.sec = "crc";
  EXPECT_NE(c.Validate().message().find("sec is crc"), std::string::npos);
  c.sec = "aes";
  EXPECT_NE(c.Validate().message().find("not crc, mac or mac_encrypt"), std::string::npos);
}

}  // namespace
}  // namespace ina::host
