// ina.h's versioned structs and their conversions (capi_internal.h): every CommConfig field set
// from C reaches the C++ config and comes back, struct_size and string checks, ina_stats, the
// version functions. No fabric needed (host_capi_test creates communicators).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "capi_config_util.h"
#include "capi_fill.h"
#include "capi_internal.h"
#include "ina/ina.h"
#include "ina/version.h"

namespace {

using ina::host::CommConfig;
using ina::host::CommStats;
namespace capi = ina::host::capi;
namespace t = ina::host::testing;

ina_config Filled(bool runnable) {
  ina_config c;
  EXPECT_EQ(ina_config_init(&c), INA_OK) << ina_last_error();
  capi_fill_every_field(&c, 47123, runnable ? 1 : 0);
  return c;
}

TEST(CApiConfig, EveryFieldSetInCReachesCommConfig) {
  const ina_config c = Filled(false);
  auto r = capi::ConfigFromC(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CommConfig want = t::EveryFieldConfig(47123, false);
  // The values are worth testing: none of them is CommConfig's default.
  t::ExpectFields(want, CommConfig{}, /*same=*/false);
  t::ExpectFields(*r, want, /*same=*/true);
}

TEST(CApiConfig, EveryFieldComesBackToC) {
  const ina_config c = Filled(false);
  ina_config back;
  std::memset(&back, 0xA5, sizeof(back));
  ASSERT_TRUE(capi::ConfigToC(t::EveryFieldConfig(47123, false), &back, sizeof(back)).ok());
  EXPECT_EQ(back.struct_size, sizeof(ina_config));
  // Through C++ once more, so every field is compared by name.
  auto r = capi::ConfigFromC(back);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  t::ExpectFields(*r, t::EveryFieldConfig(47123, false), /*same=*/true);
  // And byte for byte (strings are NUL-padded, padding zeroed): ConfigToC(ConfigFromC(c)) == c
  // up to the tail of each string array, which ina_config_init zeroed in c too.
  const auto* a = reinterpret_cast<const unsigned char*>(&back);
  const auto* b = reinterpret_cast<const unsigned char*>(&c);
  // Up to the last field: the struct's tail padding is nobody's.
  const size_t used = offsetof(ina_config, udp_gso) + sizeof(c.udp_gso);
  for (size_t i = 0; i < used; ++i) ASSERT_EQ(a[i], b[i]) << "byte " << i;
}

// The job secret through the C API: a setter taking bytes (16 .. 64 of them), a wipe; never a
// command line.
TEST(CApiConfig, JobKeySetterChecksTheLengthAndWipeClearsIt) {
  ina_config c;
  ASSERT_EQ(ina_config_init(&c), INA_OK) << ina_last_error();
  EXPECT_STREQ(c.job_sec, "crc");
  EXPECT_EQ(c.job_key_len, 0u);
  uint8_t key[65];
  for (size_t i = 0; i < sizeof(key); ++i) key[i] = static_cast<uint8_t>(i + 1);
  EXPECT_EQ(ina_config_set_job_key(&c, key, 15), INA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ina_last_error()).find("15 bytes"), std::string::npos) << ina_last_error();
  EXPECT_EQ(ina_config_set_job_key(&c, key, 65), INA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ina_config_set_job_key(&c, nullptr, 16), INA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c.job_key_len, 0u);
  ASSERT_EQ(ina_config_set_job_key(&c, key, 16), INA_OK) << ina_last_error();
  EXPECT_STREQ(c.job_sec, "mac");
  auto r = capi::ConfigFromC(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sec, "mac");
  ASSERT_EQ(r->job_secret.size(), 16u);
  EXPECT_EQ(r->job_secret.bytes()[15], 16);
  EXPECT_TRUE(r->Validate().ok()) << r->Validate().ToString();
  std::strcpy(c.job_sec, "mac_encrypt");
  ASSERT_EQ(ina_config_set_job_key(&c, key, 64), INA_OK);
  EXPECT_STREQ(c.job_sec, "mac_encrypt");  // a keyed mode stays
  ina_config_wipe_job_key(&c);
  EXPECT_EQ(c.job_key_len, 0u);
  for (uint8_t b : c.job_key) ASSERT_EQ(b, 0);
}

// INA_JOB_KEY through ina_config_init: the secret from a file only its owner may read, mode mac;
// a file others may read is refused.
TEST(CApiConfig, JobKeyFromTheEnvironment) {
  char dir[] = "/tmp/ina_capi_key_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/job.key";
  std::ofstream(path) << "000102030405060708090a0b0c0d0e0f1011121314151617\n";
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  setenv("INA_JOB_KEY", path.c_str(), 1);
  ina_config c;
  const int rc = ina_config_init(&c);
  const std::string err = ina_last_error();
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  ina_config d;
  const int rc_open = ina_config_init(&d);
  const std::string err_open = ina_last_error();
  unsetenv("INA_JOB_KEY");
  std::remove(path.c_str());
  rmdir(dir);
  ASSERT_EQ(rc, INA_OK) << err;
  EXPECT_STREQ(c.job_sec, "mac");
  ASSERT_EQ(c.job_key_len, 24u);
  EXPECT_EQ(c.job_key[23], 0x17);
  EXPECT_EQ(rc_open, INA_ERR_FAILED_PRECONDITION);
  EXPECT_NE(err_open.find("chmod 600"), std::string::npos) << err_open;
}

TEST(CApiConfig, InitGivesDefaultsAndStructSize) {
  ina_config c;
  std::memset(&c, 0xA5, sizeof(c));
  ASSERT_EQ(ina_config_init(&c), INA_OK) << ina_last_error();
  EXPECT_EQ(c.struct_size, sizeof(ina_config));
  auto r = capi::ConfigFromC(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  t::ExpectFields(*r, CommConfig{}, /*same=*/true);
  EXPECT_EQ(c.dpdk_zero_copy, 1);
  EXPECT_EQ(c.socket_buffer_bytes, 8 << 20);
}

TEST(CApiConfig, EnvironmentReachesTheDpdkFields) {
  setenv("INA_TRANSPORT", "dpdk", 1);
  setenv("INA_DPDK_EAL", "-l 1 --no-huge", 1);
  setenv("INA_DPDK_PORT", "net_af_packet0", 1);
  setenv("INA_DPDK_LOCAL", "10.9.8.7:5555", 1);
  setenv("INA_DPDK_ZERO_COPY", "0", 1);
  ina_config c;
  const int rc = ina_config_init(&c);
  const std::string err = ina_last_error();
  for (const char* v :
       {"INA_TRANSPORT", "INA_DPDK_EAL", "INA_DPDK_PORT", "INA_DPDK_LOCAL", "INA_DPDK_ZERO_COPY"}) {
    unsetenv(v);
  }
  ASSERT_EQ(rc, INA_OK) << err;
  EXPECT_STREQ(c.transport, "dpdk");
  EXPECT_STREQ(c.dpdk_eal_args, "-l 1 --no-huge");
  EXPECT_STREQ(c.dpdk_port, "net_af_packet0");
  EXPECT_STREQ(c.dpdk_local_ip, "10.9.8.7");
  EXPECT_EQ(c.dpdk_local_port, 5555);
  EXPECT_EQ(c.dpdk_zero_copy, 0);
}

TEST(CApiConfig, ValueLongerThanItsArrayIsAnErrorNotTruncated) {
  setenv("INA_TRANSPORT", "dpdk", 1);
  setenv("INA_DPDK_EAL", std::string(2000, 'x').c_str(), 1);
  ina_config c;
  const int rc = ina_config_init(&c);
  const std::string err = ina_last_error();
  unsetenv("INA_TRANSPORT");
  unsetenv("INA_DPDK_EAL");
  EXPECT_EQ(rc, INA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err.find("dpdk_eal_args"), std::string::npos) << err;
  EXPECT_NE(err.find("2000"), std::string::npos) << err;
}

TEST(CApiConfig, UnknownStructSizeIsRejectedWithBothSizes) {
  ina_config c = Filled(true);
  for (size_t size : {size_t{0}, sizeof(ina_config) - 8, sizeof(ina_config) + 8}) {
    SCOPED_TRACE(size);
    c.struct_size = size;
    ina_comm* comm = reinterpret_cast<ina_comm*>(1);
    EXPECT_EQ(ina_comm_create(&c, &comm), INA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(comm, nullptr);
    const std::string err = ina_last_error();
    EXPECT_NE(err.find("struct_size " + std::to_string(size)), std::string::npos) << err;
    EXPECT_NE(err.find(std::to_string(sizeof(ina_config))), std::string::npos) << err;
    EXPECT_NE(err.find("newer ina.h"), std::string::npos) << err;

    // ina_config_init_sized with that size leaves the struct alone.
    ina_config untouched;
    std::memset(&untouched, 0x5A, sizeof(untouched));
    EXPECT_EQ(ina_config_init_sized(&untouched, size), INA_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(static_cast<unsigned char>(untouched.switch_host[0]), 0x5A);
  }
  EXPECT_EQ(ina_config_init_sized(nullptr, sizeof(ina_config)), INA_ERR_INVALID_ARGUMENT);
}

// A caller built against an older ina.h: the library reads and writes only the fields that
// layout has; the others get CommConfig's defaults. Pretends the release before had fields up to
// `transport` (the real table has one layout so far).
TEST(CApiConfig, OlderLayoutGetsDefaultsForTheFieldsItLacks) {
  const size_t old_used = offsetof(ina_config, socket_buffer_bytes);
  const size_t old_size = (old_used + alignof(ina_config) - 1) / alignof(ina_config) *
                          alignof(ina_config);  // sizeof() of that older struct
  const capi::Layout layouts[] = {{old_size, old_used}, {sizeof(ina_config), sizeof(ina_config)}};
  ina_config c = Filled(false);
  c.struct_size = old_size;
  auto r = capi::ConfigFromC(c, layouts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CommConfig want = t::EveryFieldConfig(47123, false);
  EXPECT_EQ(r->switch_host, want.switch_host);
  EXPECT_EQ(r->job_id, want.job_id);
  EXPECT_EQ(r->rto_initial_us, want.rto_initial_us);
  EXPECT_EQ(r->transport, want.transport);
  CommConfig tail_defaults = want;  // everything from socket_buffer_bytes on is the default
  tail_defaults.socket_buffer_bytes = CommConfig{}.socket_buffer_bytes;
  tail_defaults.dpdk = CommConfig{}.dpdk;
  tail_defaults.progress_threads = CommConfig{}.progress_threads;
  tail_defaults.quant = CommConfig{}.quant;
  tail_defaults.udp_gso = CommConfig{}.udp_gso;
  tail_defaults.verbs = CommConfig{}.verbs;
  tail_defaults.slot_wait_timeout_ms = CommConfig{}.slot_wait_timeout_ms;
  tail_defaults.staging_bytes = CommConfig{}.staging_bytes;
  tail_defaults.switch_cores = CommConfig{}.switch_cores;
  tail_defaults.sec = CommConfig{}.sec;
  tail_defaults.job_secret = CommConfig{}.job_secret;
  t::ExpectFields(*r, tail_defaults, /*same=*/true);

  // Writing for that caller touches nothing past its fields.
  ina_config out;
  std::memset(&out, 0x5A, sizeof(out));
  ASSERT_TRUE(capi::ConfigToC(want, &out, old_size, layouts).ok());
  EXPECT_EQ(out.struct_size, old_size);
  EXPECT_STREQ(out.transport, "dpdk");
  const auto* bytes = reinterpret_cast<const unsigned char*>(&out);
  for (size_t i = old_used; i < sizeof(out); ++i) ASSERT_EQ(bytes[i], 0x5A) << "byte " << i;
}

TEST(CApiConfig, StringWithoutItsNulIsRejected) {
  ina_config c = Filled(true);
  std::memset(c.transport, 'u', sizeof(c.transport));
  auto r = capi::ConfigFromC(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ina::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("transport"), std::string::npos) << r.status().ToString();

  c = Filled(true);
  std::memset(c.dpdk_fabric_mac, 'f', sizeof(c.dpdk_fabric_mac));
  ina_comm* comm = nullptr;
  EXPECT_EQ(ina_comm_create(&c, &comm), INA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ina_last_error()).find("dpdk_fabric_mac"), std::string::npos)
      << ina_last_error();
}

TEST(CApiConfig, ZeroCopyIsZeroOrOne) {
  ina_config c = Filled(true);
  c.dpdk_zero_copy = 2;
  auto r = capi::ConfigFromC(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dpdk_zero_copy"), std::string::npos);
  c.dpdk_zero_copy = 1;
  r = capi::ConfigFromC(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->dpdk.zero_copy);
}

TEST(CApiConfig, UdpGsoIsZeroOrOneAndQuantIsValidated) {
  ina_config c = Filled(true);
  c.udp_gso = 2;
  auto r = capi::ConfigFromC(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("udp_gso"), std::string::npos);
  c.udp_gso = 1;
  std::strcpy(c.quant, "sse9");
  ina_comm* comm = nullptr;
  EXPECT_EQ(ina_comm_create(&c, &comm), INA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ina_last_error()).find("quant 'sse9'"), std::string::npos)
      << ina_last_error();
}

// The real 0.1 layout (up to progress_threads, 1568 bytes on LP64): its callers get the 0.2
// fields' defaults, and writing for them stops at their last field.
TEST(CApiConfig, Release01LayoutStillWorks) {
  const size_t used01 = offsetof(ina_config, progress_threads) + sizeof(int);
  const size_t size01 =
      (used01 + alignof(ina_config) - 1) / alignof(ina_config) * alignof(ina_config);
  ina_config c = Filled(false);
  c.struct_size = size01;
  auto r = capi::ConfigFromC(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->progress_threads, 2);
  EXPECT_EQ(r->quant, CommConfig{}.quant);
  EXPECT_EQ(r->udp_gso, CommConfig{}.udp_gso);
  ina_config out;
  std::memset(&out, 0x5A, sizeof(out));
  ASSERT_EQ(ina_config_init_sized(&out, size01), INA_OK) << ina_last_error();
  EXPECT_EQ(out.struct_size, size01);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&out);
  for (size_t i = used01; i < sizeof(out); ++i) ASSERT_EQ(bytes[i], 0x5A) << "byte " << i;
}

// The real 0.2 layout (up to udp_gso, 1584 bytes on LP64): its callers get the verbs fields'
// defaults, and writing for them stops at udp_gso.
TEST(CApiConfig, Release02LayoutStillWorks) {
  const size_t used02 = offsetof(ina_config, udp_gso) + sizeof(int);
  const size_t size02 =
      (used02 + alignof(ina_config) - 1) / alignof(ina_config) * alignof(ina_config);
  ina_config c = Filled(false);
  c.struct_size = size02;
  auto r = capi::ConfigFromC(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->quant, "scalar");
  const auto& [d, p, g, m, q, k, sd, rd] = r->verbs;
  const auto& [d0, p0, g0, m0, q0, k0, sd0, rd0] = CommConfig{}.verbs;
  EXPECT_EQ(d, d0);
  EXPECT_EQ(p, p0);
  EXPECT_EQ(g, g0);
  EXPECT_EQ(m, m0);
  EXPECT_EQ(q, q0);
  EXPECT_EQ(k, k0);
  EXPECT_EQ(sd, sd0);
  EXPECT_EQ(rd, rd0);
  EXPECT_EQ(r->slot_wait_timeout_ms, CommConfig{}.slot_wait_timeout_ms);
  EXPECT_EQ(r->staging_bytes, CommConfig{}.staging_bytes);
  ina_config out;
  std::memset(&out, 0x5A, sizeof(out));
  ASSERT_EQ(ina_config_init_sized(&out, size02), INA_OK) << ina_last_error();
  EXPECT_EQ(out.struct_size, size02);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&out);
  for (size_t i = used02; i < sizeof(out); ++i) ASSERT_EQ(bytes[i], 0x5A) << "byte " << i;
}

// The verbs fields set from C are validated with the config (transport "verbs"), naming the
// field, and a device name without its NUL is refused.
TEST(CApiConfig, VerbsFieldsAreValidatedFromC) {
  ina_config c = Filled(false);
  std::strcpy(c.transport, "verbs");
  c.progress_threads = 1;  // lanes are udp only
  c.switch_cores = 1;
  c.verbs_mtu = 1500;
  ina_comm* comm = nullptr;
  EXPECT_EQ(ina_comm_create(&c, &comm), INA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ina_last_error()).find("mtu 1500"), std::string::npos) << ina_last_error();
  c.verbs_mtu = 1024;
  c.verbs_remote_qpn = 1;
  EXPECT_EQ(ina_comm_create(&c, &comm), INA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ina_last_error()).find("remote_qpn 1"), std::string::npos)
      << ina_last_error();
  c = Filled(false);
  std::memset(c.verbs_device, 'r', sizeof(c.verbs_device));
  auto r = capi::ConfigFromC(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("verbs_device"), std::string::npos) << r.status().ToString();
}

TEST(CApiConfig, InvalidConfigNamesTheField) {
  ina_config c = Filled(true);
  c.socket_buffer_bytes = -1;
  ina_comm* comm = nullptr;
  EXPECT_EQ(ina_comm_create(&c, &comm), INA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ina_last_error()).find("socket_buffer_bytes"), std::string::npos)
      << ina_last_error();
}

TEST(CApiStats, EveryCounterReachesC) {
  CommStats s;
  const auto& [a, b, c, d, e, f, g, h, i, j, k] = s;  // a field added to CommStats breaks this
  (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h, (void)i, (void)j, (void)k;
  s.packets_sent = 11;
  s.packets_received = 12;
  s.retransmissions = 13;
  s.results = 14;
  s.stale_results_ignored = 15;
  s.ops_completed = 16;
  s.ops_failed = 17;
  s.bad_crc = 18;
  s.packets_from_device = 19;
  s.results_forged = 20;
  s.socket_drops = 21;
  ina_stats out;
  std::memset(&out, 0xA5, sizeof(out));
  ASSERT_TRUE(capi::StatsToC(s, &out, sizeof(out)).ok());
  EXPECT_EQ(out.struct_size, sizeof(ina_stats));
  EXPECT_EQ(out.packets_sent, 11u);
  EXPECT_EQ(out.packets_received, 12u);
  EXPECT_EQ(out.retransmissions, 13u);
  EXPECT_EQ(out.results, 14u);
  EXPECT_EQ(out.stale_results_ignored, 15u);
  EXPECT_EQ(out.ops_completed, 16u);
  EXPECT_EQ(out.ops_failed, 17u);
  EXPECT_EQ(out.bad_crc, 18u);
  EXPECT_EQ(out.packets_from_device, 19u);
  EXPECT_EQ(out.results_forged, 20u);
  EXPECT_EQ(out.socket_drops, 21u);

  // The 0.1 layout (up to ops_failed, 64 bytes) is still served, bad_crc untouched.
  ina_stats old;
  std::memset(&old, 0xA5, sizeof(old));
  ASSERT_TRUE(capi::StatsToC(s, &old, 64).ok());
  EXPECT_EQ(old.struct_size, 64u);
  EXPECT_EQ(old.ops_failed, 17u);
  EXPECT_EQ(old.bad_crc, 0xA5A5A5A5A5A5A5A5u);
  // The second layout (up to bad_crc, 72 bytes): packets_from_device untouched.
  ina_stats second;
  std::memset(&second, 0xA5, sizeof(second));
  ASSERT_TRUE(capi::StatsToC(s, &second, 72).ok());
  EXPECT_EQ(second.bad_crc, 18u);
  EXPECT_EQ(second.packets_from_device, 0xA5A5A5A5A5A5A5A5u);
  // The third layout (up to packets_from_device, 80 bytes): results_forged untouched.
  ina_stats third;
  std::memset(&third, 0xA5, sizeof(third));
  ASSERT_TRUE(capi::StatsToC(s, &third, 80).ok());
  EXPECT_EQ(third.packets_from_device, 19u);
  EXPECT_EQ(third.results_forged, 0xA5A5A5A5A5A5A5A5u);
  // The fourth layout (up to results_forged, 88 bytes): socket_drops untouched.
  ina_stats fourth;
  std::memset(&fourth, 0xA5, sizeof(fourth));
  ASSERT_TRUE(capi::StatsToC(s, &fourth, 88).ok());
  EXPECT_EQ(fourth.results_forged, 20u);
  EXPECT_EQ(fourth.socket_drops, 0xA5A5A5A5A5A5A5A5u);

  auto bad = capi::StatsToC(s, &out, sizeof(out) + 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("ina_stats"), std::string::npos) << bad.ToString();
  EXPECT_EQ(ina_comm_stats(nullptr, &out), INA_ERR_INVALID_ARGUMENT);
}

TEST(CApiVersion, LibraryAndHeadersAgree) {
  EXPECT_EQ(ina_version(), static_cast<uint32_t>(INA_VERSION));
  EXPECT_STREQ(ina_version_string(), INA_VERSION_STRING);
  const std::string want = std::to_string(INA_VERSION_MAJOR) + "." +
                           std::to_string(INA_VERSION_MINOR) + "." +
                           std::to_string(INA_VERSION_PATCH);
  EXPECT_EQ(want, ina_version_string());
  EXPECT_EQ(ina_version(), static_cast<uint32_t>(INA_VERSION_MAJOR * 10000 +
                                                 INA_VERSION_MINOR * 100 + INA_VERSION_PATCH));
}

}  // namespace
