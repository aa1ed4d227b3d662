// The verbs transport on the host: config validation, INA_VERBS_* parsing, and the errors when
// there is no such RDMA device (this machine's kernel has no RDMA: every open must fail cleanly,
// naming the device). The transport on a real (soft-RoCE) device runs in the VM harness:
// verbs_transport_rxe_test, label hw here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ina/host/transport.h"

namespace ina::host {
namespace {

class EnvGuard {
 public:
  EnvGuard(const char* var, const char* value) : var_(var) {
    if (const char* old = std::getenv(var)) old_ = old, had_ = true;
    setenv(var, value, 1);
  }
  ~EnvGuard() { had_ ? (void)setenv(var_, old_.c_str(), 1) : (void)unsetenv(var_); }

 private:
  const char* var_;
  std::string old_;
  bool had_ = false;
};

TEST(VerbsConfig, DefaultsAreValid) { EXPECT_TRUE(ValidateVerbsConfig(VerbsConfig{}).ok()); }

TEST(VerbsConfig, RejectsOutOfRangeNamingTheField) {
  struct Case {
    void (*mutate)(VerbsConfig*);
    const char* needle;
  };
  const Case cases[] = {
      {[](VerbsConfig* c) { c->port = 0; }, "port"},
      {[](VerbsConfig* c) { c->port = 256; }, "port"},
      {[](VerbsConfig* c) { c->gid_index = -2; }, "gid_index"},
      {[](VerbsConfig* c) { c->mtu = 1500; }, "mtu 1500"},
      {[](VerbsConfig* c) { c->remote_qpn = 1; }, "remote_qpn"},
      {[](VerbsConfig* c) { c->remote_qpn = 0x1000000; }, "remote_qpn"},
      {[](VerbsConfig* c) { c->qkey = 0x80010000; }, "qkey"},
      {[](VerbsConfig* c) { c->send_depth = 0; }, "send_depth"},
      {[](VerbsConfig* c) { c->recv_depth = 20000; }, "recv_depth"},
  };
  for (const auto& k : cases) {
    VerbsConfig c;
    k.mutate(&c);
    const Status s = ValidateVerbsConfig(c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << k.needle;
    EXPECT_NE(s.message().find(k.needle), std::string::npos) << s.message();
  }
  for (int mtu : {0, 256, 512, 1024, 2048, 4096}) {
    VerbsConfig c;
    c.mtu = mtu;
    EXPECT_TRUE(ValidateVerbsConfig(c).ok()) << mtu;
  }
}

TEST(VerbsConfig, EnvSetsEveryField) {
  EnvGuard d("INA_VERBS_DEVICE", "rxe7"), p("INA_VERBS_PORT", "2"), g("INA_VERBS_GID", "3"),
      m("INA_VERBS_MTU", "2048"), q("INA_VERBS_QPN", "0x1234"), k("INA_VERBS_QKEY", "0x11");
  VerbsConfig c;
  ASSERT_TRUE(ApplyVerbsEnv(&c).ok());
  EXPECT_EQ(c.device, "rxe7");
  EXPECT_EQ(c.port, 2);
  EXPECT_EQ(c.gid_index, 3);
  EXPECT_EQ(c.mtu, 2048);
  EXPECT_EQ(c.remote_qpn, 0x1234u);
  EXPECT_EQ(c.qkey, 0x11u);
}

TEST(VerbsConfig, EnvRejectsMalformedNamingTheVariable) {
  for (auto [var, val] : {std::pair{"INA_VERBS_PORT", "x"},
                          {"INA_VERBS_MTU", "1500"},
                          {"INA_VERBS_QPN", "1"},
                          {"INA_VERBS_GID", "300"}}) {
    EnvGuard e(var, val);
    VerbsConfig c;
    const Status s = ApplyVerbsEnv(&c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << var;
    EXPECT_FALSE(s.message().empty());
  }
}

TEST(VerbsTransport, MissingDeviceIsACleanErrorNamingIt) {
  TransportConfig c;
  c.kind = "verbs";
  c.fabric_host = "10.0.1.2";
  c.verbs.device = "ina_no_such_dev0";
  auto t = MakeTransport(c);
  ASSERT_FALSE(t.ok());
  // NotFound when libibverbs is built (no device of that name here), Unimplemented otherwise.
  EXPECT_TRUE(t.status().code() == StatusCode::kNotFound ||
              t.status().code() == StatusCode::kUnimplemented)
      << t.status().message();
  if (t.status().code() == StatusCode::kNotFound) {
    EXPECT_NE(t.status().message().find("ina_no_such_dev0"), std::string::npos)
        << t.status().message();
  }
}

// MakeTransport takes the config as given: a bad field is InvalidArgument before any device is
// looked at, and the INA_VERBS_* variables (the config's business: CommConfig::FromEnv) are not
// applied again over what the caller set.
TEST(VerbsTransport, BadFabricHostAndBadFieldComeBeforeAnyDeviceAndEnvIsNotReapplied) {
  TransportConfig c;
  c.kind = "verbs";
  c.fabric_host = "fabric.example";
  auto t = MakeTransport(c);
  ASSERT_FALSE(t.ok());
  if (t.status().code() != StatusCode::kUnimplemented) {
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().message();
    EXPECT_NE(t.status().message().find("fabric.example"), std::string::npos);
  }
  c.fabric_host = "10.0.1.2";
  c.verbs.mtu = 9000;
  t = MakeTransport(c);
  ASSERT_FALSE(t.ok());
  if (t.status().code() != StatusCode::kUnimplemented) {
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().message();
    EXPECT_NE(t.status().message().find("mtu 9000"), std::string::npos) << t.status().message();
  }
  EnvGuard e("INA_VERBS_MTU", "9001");
  c.verbs.mtu = 0;
  t = MakeTransport(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message().find("9001"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().code(), StatusCode::kInvalidArgument) << t.status().message();
}

}  // namespace
}  // namespace ina::host
