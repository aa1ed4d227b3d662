// cmake --install into a scratch prefix, then what a user of the installed libina does: compile
// every installed header on its own, check what libina.so exports, build a C and a C++ consumer
// both ways (a CMake project with find_package(ina), and plain cc/c++ with pkg-config) and run
// them as the two ranks of a job on the installed ina-switchd (loopback, ephemeral port).
//
// Every test installs into its own mkdtemp prefix (ctest runs each TEST in its own process) and
// removes it at the end (INA_KEEP_SCRATCH=1 keeps it and prints where). Every command runs under
// timeout(1); the switch is killed when its Process goes away.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "process.h"

namespace {

namespace fs = std::filesystem;
using ina::bench::Process;

struct ShResult {
  int rc = -1;
  std::string out;  // stdout and stderr
};

class InstallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/ina-install-test-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return;
    scratch_ = new fs::path(tmpl);
    prefix_ = new fs::path(*scratch_ / "prefix");
    install_ = new ShResult(
        Sh("'" IT_CMAKE "' --install '" IT_BUILD_DIR "' --prefix '" + prefix_->string() + "'"));
  }

  static void TearDownTestSuite() {
    if (scratch_ == nullptr) return;
    if (getenv("INA_KEEP_SCRATCH") != nullptr) {
      std::printf("scratch kept: %s\n", scratch_->c_str());
    } else {
      std::error_code ec;
      fs::remove_all(*scratch_, ec);
    }
    delete install_;
    delete prefix_;
    delete scratch_;
    install_ = nullptr;
    prefix_ = nullptr;
    scratch_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(scratch_, nullptr) << "mkdtemp failed";
    ASSERT_EQ(install_->rc, 0) << "cmake --install failed (is everything built?):\n"
                               << install_->out;
  }

  // Runs `script` with bash (under timeout), stdout and stderr captured.
  static ShResult Sh(const std::string& script, int timeout_s = 120) {
    static int n = 0;
    const fs::path file = *scratch_ / ("cmd" + std::to_string(n) + ".sh");
    const fs::path log = *scratch_ / ("cmd" + std::to_string(n) + ".log");
    ++n;
    std::ofstream(file) << "set -u\n" << script << "\n";
    const std::string cmd = "timeout -k 5 " + std::to_string(timeout_s) + " bash '" +
                            file.string() + "' > '" + log.string() + "' 2>&1";
    const int st = std::system(cmd.c_str());
    ShResult r;
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    r.out = ss.str();
    return r;
  }

  static fs::path P(const std::string& rel) { return *prefix_ / rel; }
  static std::string Q(const fs::path& p) { return "'" + p.string() + "'"; }

  // The installed ina-switchd on 127.0.0.1, ephemeral port.
  struct Switch {
    std::optional<Process> proc;
    uint16_t port = 0;
  };
  static void StartSwitch(Switch* sw) {
    auto p = Process::Start(
        {P(IT_BINDIR "/ina-switchd").string(), "--bind", "127.0.0.1", "--port", "0"});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    sw->proc.emplace(std::move(*p));
    auto line = sw->proc->WaitForLine("ina-switchd listening on", std::chrono::seconds(10));
    ASSERT_TRUE(line.ok()) << line.status().ToString();
    sw->port = static_cast<uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
  }

  // Runs `bin` as rank 0 and rank 1 of job `job` (world 2) on the switch; both must print their
  // "<name> rank R/2: ok" line and exit 0. `env` goes before each command.
  static void RunPair(const Switch& sw, int job, const fs::path& bin, const std::string& name,
                      const std::string& env) {
    const std::string common = "export INA_SWITCH=127.0.0.1:" + std::to_string(sw.port) +
                               " INA_JOB=" + std::to_string(job) + " INA_WORLD=2\n";
    const ShResult r = Sh(common + env + " INA_RANK=0 timeout 30 " + Q(bin) + " & p=$!\n" + env +
                              " INA_RANK=1 timeout 30 " + Q(bin) + "; r1=$?\nwait $p; r0=$?\n" +
                              "echo \"exit codes: $r0 $r1\"; test $r0 = 0 && test $r1 = 0",
                          60);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find(name + " rank 0/2: ok"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(name + " rank 1/2: ok"), std::string::npos) << r.out;
  }

  // The libina.so that `bin` loads (per ldd, with `env`) must be the installed one.
  static void ExpectLoadsInstalledLibina(const fs::path& bin, const std::string& env) {
    const ShResult r = Sh(env + " ldd " + Q(bin));
    ASSERT_EQ(r.rc, 0) << r.out;
    const std::string want = "=> " + P(IT_LIBDIR "/" IT_SONAME).string();
    EXPECT_NE(r.out.find(want), std::string::npos) << "wanted '" << want << "' in:\n" << r.out;
    EXPECT_EQ(r.out.find("not found"), std::string::npos) << r.out;
  }

  static fs::path* scratch_;
  static fs::path* prefix_;
  static ShResult* install_;
};

fs::path* InstallTest::scratch_ = nullptr;
fs::path* InstallTest::prefix_ = nullptr;
ShResult* InstallTest::install_ = nullptr;

TEST_F(InstallTest, PutsEachPieceInItsConventionalPlace) {
  for (const char* rel :
       {IT_BINDIR "/ina-switchd", IT_LIBDIR "/" IT_REALNAME, IT_LIBDIR "/" IT_SONAME,
        IT_LIBDIR "/" IT_LINKNAME, IT_INCLUDEDIR "/ina/ina.h", IT_INCLUDEDIR "/ina/version.h",
        IT_INCLUDEDIR "/ina/host/communicator.h", IT_INCLUDEDIR "/ina/host/config.h",
        IT_INCLUDEDIR "/ina/host/transport.h", IT_INCLUDEDIR "/ina/host/quant.h",
        IT_INCLUDEDIR "/ina/proto/wire.h", IT_INCLUDEDIR "/ina/base/status.h",
        IT_LIBDIR "/cmake/ina/inaConfig.cmake", IT_LIBDIR "/cmake/ina/inaConfigVersion.cmake",
        IT_LIBDIR "/cmake/ina/inaTargets.cmake", IT_LIBDIR "/pkgconfig/ina.pc"}) {
    EXPECT_TRUE(fs::exists(P(rel))) << rel;
  }
  // libina.so -> libina.so.<soversion> -> libina.so.<version>, whose SONAME is the middle one.
  EXPECT_EQ(fs::read_symlink(P(IT_LIBDIR "/" IT_LINKNAME)).string(), IT_SONAME);
  EXPECT_EQ(fs::read_symlink(P(IT_LIBDIR "/" IT_SONAME)).string(), IT_REALNAME);
  const ShResult d = Sh("readelf -d " + Q(P(IT_LIBDIR "/" IT_REALNAME)));
  ASSERT_EQ(d.rc, 0) << d.out;
  EXPECT_NE(d.out.find("Library soname: [" IT_SONAME "]"), std::string::npos) << d.out;
  // Nothing refers back to the build tree.
  const ShResult g = Sh("! grep -rl '" IT_BUILD_DIR "' " + Q(P(IT_LIBDIR "/cmake")) + " " +
                        Q(P(IT_LIBDIR "/pkgconfig")));
  EXPECT_EQ(g.rc, 0) << "build-tree paths in the installed packaging files:\n" << g.out;
  const ShResult s = Sh(Q(P(IT_BINDIR "/ina-switchd")) + " --help");
  EXPECT_EQ(s.rc, 0) << s.out;
}

TEST_F(InstallTest, EveryInstalledHeaderCompilesOnItsOwn) {
  std::set<std::string> headers;
  const fs::path inc = P(IT_INCLUDEDIR);
  for (const auto& e : fs::recursive_directory_iterator(inc)) {
    if (e.path().extension() == ".h") headers.insert(fs::relative(e.path(), inc).string());
  }
  for (const char* h :
       {"ina/ina.h", "ina/version.h", "ina/host/communicator.h", "ina/host/config.h",
        "ina/host/transport.h", "ina/host/quant.h", "ina/proto/wire.h", "ina/base/status.h"}) {
    EXPECT_EQ(headers.count(h), 1u) << h << " not installed";
  }
  // Each header alone, with only the prefix on the include path; the C API also as C11.
  std::string script = "fail=0\n";
  for (const std::string& h : headers) {
    script += "echo '#include <" + h + ">' | '" IT_CXX "' -std=c++20 -Wall -Wextra -Werror " +
              "-fsyntax-only -I" + Q(inc) + " -x c++ - || { echo 'FAIL c++ " + h + "'; fail=1; }\n";
  }
  for (const char* h : {"ina/ina.h", "ina/version.h"}) {
    script += std::string("printf '#include <") + h +
              ">\\ntypedef int ina_not_empty;\\n' | '" IT_CC "' -std=c11 -pedantic-errors " +
              "-Wall -Wextra -Werror -fsyntax-only -I" + Q(inc) + " -x c - || { echo 'FAIL c " + h +
              "'; fail=1; }\n";
  }
  script += "exit $fail";
  const ShResult r = Sh(script);
  EXPECT_EQ(r.rc, 0) << r.out;
  std::printf("%zu headers compiled on their own\n", headers.size());
}

TEST_F(InstallTest, SharedLibraryExportsOnlyThePublicApi) {
  const fs::path so = P(IT_LIBDIR "/" IT_REALNAME);
  const ShResult r = Sh("nm -D --defined-only -C " + Q(so) + " | cut -d' ' -f3-");
  ASSERT_EQ(r.rc, 0) << r.out;
  std::set<std::string> names;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) names.insert(line);
  }
  for (const std::string& n : names) {
    const bool public_prefix = n.rfind("ina_", 0) == 0 || n.rfind("ina::", 0) == 0 ||
                               n.rfind("typeinfo for ina::", 0) == 0 ||
                               n.rfind("typeinfo name for ina::", 0) == 0 ||
                               n.rfind("vtable for ina::", 0) == 0;
    EXPECT_TRUE(public_prefix) << "exported: " << n;
    EXPECT_EQ(n.find("internal"), std::string::npos) << "exported: " << n;
    EXPECT_EQ(n.find("anonymous namespace"), std::string::npos) << "exported: " << n;
    EXPECT_EQ(n.find("::Impl"), std::string::npos) << "exported: " << n;
    EXPECT_EQ(n.find("capi::"), std::string::npos) << "exported: " << n;
  }
  for (const char* want : {"ina_version",
                           "ina_version_string",
                           "ina_config_init_sized",
                           "ina_comm_create",
                           "ina_comm_destroy",
                           "ina_comm_window",
                           "ina_comm_stats_sized",
                           "ina_allreduce_f32",
                           "ina_allreduce_i32",
                           "ina_iallreduce_f32",
                           "ina_iallreduce_i32",
                           "ina_allreduce_avg_f32",
                           "ina_allreduce_avg_i32",
                           "ina_iallreduce_avg_f32",
                           "ina_iallreduce_avg_i32",
                           "ina_test",
                           "ina_wait",
                           "ina_request_free",
                           "ina_last_error",
                           "ina::host::Communicator::Create(ina::host::CommConfig const&)",
                           "ina::host::Communicator::~Communicator()",
                           "ina::host::Request::Wait()",
                           "ina::host::CommConfig::Validate() const",
                           "ina::Status::ToString[abi:cxx11]() const"}) {
    EXPECT_EQ(names.count(want), 1u) << "not exported: " << want;
  }
  std::printf("libina.so exports %zu symbols\n", names.size());
  // Every run-time dependency resolves, and no symbol stays undefined.
  const ShResult l = Sh("ldd -r " + Q(so));
  EXPECT_EQ(l.rc, 0) << l.out;
  EXPECT_EQ(l.out.find("not found"), std::string::npos) << l.out;
  EXPECT_EQ(l.out.find("undefined symbol"), std::string::npos) << l.out;
}

TEST_F(InstallTest, ConsumersBuiltWithFindPackageRun) {
  // The consumer project, out of the tree (see consumer/CMakeLists.consumer.txt).
  const fs::path src = *scratch_ / "consumer-src";
  fs::copy(IT_CONSUMER_SRC, src);
  fs::rename(src / "CMakeLists.consumer.txt", src / "CMakeLists.txt");
  const fs::path build = *scratch_ / "consumer-cmake";
  const ShResult cfg = Sh(
      "'" IT_CMAKE "' -S " + Q(src) + " -B " + Q(build) +
      " -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER='" IT_CC "' -DCMAKE_CXX_COMPILER='" IT_CXX
      "' -DINA_WANT_VERSION=" IT_VERSION " -DCMAKE_PREFIX_PATH=" +
      Q(*prefix_) + " -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF && '" IT_CMAKE "' --build " + Q(build));
  ASSERT_EQ(cfg.rc, 0) << cfg.out;
  // The package says which version it is, and (before 1.0) rejects another minor version.
  const ShResult v =
      Sh("'" IT_CMAKE "' -S " + Q(src) + " -B " + Q(*scratch_ / "consumer-cmake-wrong") +
         " -DINA_WANT_VERSION=0.99 -DCMAKE_PREFIX_PATH=" + Q(*prefix_));
  EXPECT_NE(v.rc, 0) << v.out;
  EXPECT_NE(v.out.find(IT_VERSION), std::string::npos) << v.out;

  // CMake's build RPATH finds the installed libina: no LD_LIBRARY_PATH.
  const std::string env = "env -u LD_LIBRARY_PATH";
  ExpectLoadsInstalledLibina(build / "consumer_c", env);
  ExpectLoadsInstalledLibina(build / "consumer_cxx", env);
  Switch sw;
  ASSERT_NO_FATAL_FAILURE(StartSwitch(&sw));
  RunPair(sw, 11, build / "consumer_c", "consumer-c", env);
  RunPair(sw, 12, build / "consumer_cxx", "consumer-cxx", env);
  auto st = sw.proc->Stop(SIGTERM, std::chrono::seconds(5));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
}

TEST_F(InstallTest, ConsumersBuiltWithPkgConfigRun) {
  const std::string pc = "export PKG_CONFIG_PATH=" + Q(P(IT_LIBDIR "/pkgconfig")) + "\n";
  const ShResult ver = Sh(pc + "pkg-config --modversion ina");
  ASSERT_EQ(ver.rc, 0) << ver.out;
  EXPECT_EQ(ver.out, IT_VERSION "\n");
  const fs::path out = *scratch_ / "consumer-pc";
  fs::create_directories(out);
  const ShResult b =
      Sh(pc +
         "set -e\n'" IT_CC "' -std=c11 -pedantic-errors -Wall -Wextra -Werror '" IT_CONSUMER_SRC
         "/consumer.c' $(pkg-config --cflags --libs ina) -o " +
         Q(out / "consumer_c") +
         "\n'" IT_CXX "' -std=c++20 -Wall -Wextra -Werror '" IT_CONSUMER_SRC
         "/consumer.cc' $(pkg-config --cflags --libs ina) -o " +
         Q(out / "consumer_cxx"));
  ASSERT_EQ(b.rc, 0) << b.out;
  // ina.pc has no rpath: the loader is told where the prefix is.
  const std::string env = "env LD_LIBRARY_PATH=" + Q(P(IT_LIBDIR));
  ExpectLoadsInstalledLibina(out / "consumer_c", env);
  ExpectLoadsInstalledLibina(out / "consumer_cxx", env);
  Switch sw;
  ASSERT_NO_FATAL_FAILURE(StartSwitch(&sw));
  RunPair(sw, 21, out / "consumer_c", "consumer-c", env);
  RunPair(sw, 22, out / "consumer_cxx", "consumer-cxx", env);
  auto st = sw.proc->Stop(SIGTERM, std::chrono::seconds(5));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
}

TEST_F(InstallTest, InstalledBenchRunsWithTheInstalledSwitch) {
  const fs::path bench = P(IT_BINDIR "/ina-bench");
  if (!fs::exists(bench)) GTEST_SKIP() << "ina-bench not built (needs libgloo-dev)";
  const ShResult r = Sh(Q(bench) + " --workers 2 --elements 10000 --iters 2 --no-gloo", 60);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"verified\": true"), std::string::npos) << r.out;
}

}  // namespace
