// The corpus replay of a libFuzzer target as an ordinary GoogleTest (label fuzz; tests/CMakeLists
// ina_add_fuzzer): every file of INA_FUZZ_CORPUS_DIR goes through the target's
// LLVMFuzzerTestOneInput, so a compiler without libFuzzer (gcc, the CI build) still runs the
// committed corpus. A target reports a failure by aborting (FUZZ_CHECK), which fails the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// FuzzCorpus.<target name> (INA_FUZZ_TARGET, from ina_add_fuzzer), so each replay has its own
// ctest name. The extra macro expands INA_FUZZ_TARGET before TEST pastes it.
#define INA_FUZZ_REPLAY_TEST(target) TEST(FuzzCorpus, target)

INA_FUZZ_REPLAY_TEST(INA_FUZZ_TARGET) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(INA_FUZZ_CORPUS_DIR)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream f(path, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                     std::istreambuf_iterator<char>());
    SCOPED_TRACE(path.string());
    EXPECT_EQ(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()), 0);
  }
  // An empty or missing corpus would make this test pass without checking anything.
  EXPECT_GE(files.size(), 3u) << INA_FUZZ_CORPUS_DIR;
}

}  // namespace
