// LogLinef / WriteLine (base/include/ina/base/log_line.h): processes sharing one pipe as stderr
// (the ranks of a job under one launcher) each see their lines arrive whole.
#include "ina/base/log_line.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <thread>

namespace ina {
namespace {

// Reads `fd` to EOF.
std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// kProcs children write kLines lines each to one pipe made their stderr; every line is long
// enough (kBody bytes) that a 128-byte stdio stage would split it. The parent checks that every
// line read back is one child's line, whole, and that none is missing.
TEST(LogLine, ProcessesSharingAPipeNeverInterleaveInsideALine) {
  constexpr int kProcs = 4, kLines = 300, kBody = 1500;
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t kids[kProcs];
  for (int c = 0; c < kProcs; ++c) {
    kids[c] = ::fork();
    ASSERT_GE(kids[c], 0);
    if (kids[c] == 0) {
      ::close(p[0]);
      ::dup2(p[1], STDERR_FILENO);
      const std::string body(kBody, static_cast<char>('a' + c));
      for (int i = 0; i < kLines; ++i) LogLinef("proc %d line %d: %s", c, i, body.c_str());
      ::_exit(0);
    }
  }
  ::close(p[1]);
  const std::string all = ReadAll(p[0]);
  ::close(p[0]);
  for (pid_t k : kids) {
    int st = 0;
    ASSERT_EQ(::waitpid(k, &st, 0), k);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  std::map<int, int> next;  // per child, the line number expected next (each child's are ordered)
  std::istringstream in(all);
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    int c = -1, i = -1, used = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "proc %d line %d: %n", &c, &i, &used), 2)
        << "line " << count << " is not one child's line: " << line.substr(0, 120);
    ASSERT_TRUE(c >= 0 && c < kProcs) << line.substr(0, 120);
    EXPECT_EQ(i, next[c]++) << "child " << c;
    EXPECT_EQ(line.substr(static_cast<size_t>(used)),
              std::string(kBody, static_cast<char>('a' + c)))
        << "line " << count << " (child " << c << " line " << i << ") is not whole";
    ++count;
  }
  EXPECT_EQ(count, kProcs * kLines);
}

TEST(LogLine, NewlineAddedOnlyWhereMissingAndLongLinesWhole) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const std::string long_line(10000, 'x');  // past LogLinef's 1 KiB first try and PIPE_BUF
  std::thread writer([&] {
    WriteLine(p[1], "one");
    WriteLine(p[1], "two\n");
    WriteLine(p[1], "");
    WriteLine(p[1], long_line);
    ::close(p[1]);
  });
  const std::string all = ReadAll(p[0]);
  writer.join();
  ::close(p[0]);
  EXPECT_EQ(all, "one\ntwo\n\n" + long_line + "\n");
}

TEST(LogLine, FormatsLikePrintf) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const int saved = ::dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ::dup2(p[1], STDERR_FILENO);
  ::close(p[1]);
  const std::string big(3000, 'y');
  LogLinef("rank %d: %s; %lld calls", 3, "why", 42LL);
  LogLinef("%s|%d", big.c_str(), 7);
  ::dup2(saved, STDERR_FILENO);  // closes the pipe's last write end
  ::close(saved);
  EXPECT_EQ(ReadAll(p[0]), "rank 3: why; 42 calls\n" + big + "|7\n");
  ::close(p[0]);
}

}  // namespace
}  // namespace ina
