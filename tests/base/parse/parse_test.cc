// The one number parser of every program's Config (base/include/ina/base/parse.h): what it takes,
// what it refuses, and that the refusal names the option and the text.
#include "ina/base/parse.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace ina {
namespace {

TEST(Parse, IntegersInRange) {
  EXPECT_EQ(*ParseInt("--n", "0", 0, 10), 0);
  EXPECT_EQ(*ParseInt("--n", "10", 0, 10), 10);
  EXPECT_EQ(*ParseInt("--n", "0x1f", 0, 100), 31);
  EXPECT_EQ(*ParseInt("--n", "-5", -10, 10), -5);
  EXPECT_EQ(*ParseInt("--n", "-9223372036854775808", INT64_MIN, 0), INT64_MIN);
  EXPECT_EQ(*ParseUint("--seed", "18446744073709551615", 0, UINT64_MAX), UINT64_MAX);
  for (const char* bad : {"", " 1", "1 ", "+1", "1x", "0x", "x1", "11", "-1", "1.0", "0x-1",
                          "99999999999999999999"}) {
    auto r = ParseInt("--n", bad, 0, 10);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), std::string("--n='") + bad + "': not an integer in [0, 10]");
  }
  EXPECT_FALSE(ParseUint("--seed", "-1", 0, UINT64_MAX).ok());
  EXPECT_FALSE(ParseUint("--seed", "18446744073709551616", 0, UINT64_MAX).ok());
  EXPECT_FALSE(ParseInt("--n", "9223372036854775808", INT64_MIN, INT64_MAX).ok());
}

TEST(Parse, RealsAndBools) {
  EXPECT_DOUBLE_EQ(*ParseReal("--p", "0.25", 0, 1), 0.25);
  EXPECT_DOUBLE_EQ(*ParseReal("--p", "1", 0, 1), 1.0);
  for (const char* bad : {"", "x", "0.5x", "1.5", "-0.1", "nan", "inf", " 0.1"}) {
    auto r = ParseReal("INA_P", bad, 0, 1);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("INA_P='") + bad + "'"), std::string::npos)
        << r.status().message();
  }
  EXPECT_TRUE(*ParseBool("--b", "1"));
  EXPECT_TRUE(*ParseBool("--b", "on"));
  EXPECT_FALSE(*ParseBool("--b", "0"));
  EXPECT_FALSE(*ParseBool("--b", "off"));
  auto r = ParseBool("INA_UDP_GSO", "2");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "INA_UDP_GSO='2': not 0 or 1 (off or on)");
}

}  // namespace
}  // namespace ina

// Environment overrides go through the same parsers: unset leaves the field, a set value is
// parsed (empty and malformed ones refused, naming the variable), out of range refused.
TEST(Parse, EnvironmentOverrides) {
  const char* var = "INA_PARSE_TEST_VALUE";
  unsetenv(var);
  int x = 7;
  EXPECT_TRUE(ina::EnvInt(var, 0, 100, &x).ok());
  EXPECT_EQ(x, 7);
  setenv(var, "0x20", 1);
  EXPECT_TRUE(ina::EnvInt(var, 0, 100, &x).ok());
  EXPECT_EQ(x, 32);
  setenv(var, "101", 1);
  auto st = ina::EnvInt(var, 0, 100, &x);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(var), std::string::npos) << st.message();
  EXPECT_EQ(x, 32);
  setenv(var, "", 1);
  EXPECT_FALSE(ina::EnvInt(var, 0, 100, &x).ok());
  uint64_t u = 1;
  setenv(var, "18446744073709551615", 1);
  EXPECT_TRUE(ina::EnvUint(var, 0, UINT64_MAX, &u).ok());
  EXPECT_EQ(u, UINT64_MAX);
  setenv(var, "-1", 1);
  EXPECT_FALSE(ina::EnvUint(var, 0, UINT64_MAX, &u).ok());
  unsetenv(var);
}
