// Shared by the libFuzzer targets (tests/**/fuzz*): FUZZ_CHECK(cond, fmt, ...) prints the failed
// condition and its context to stderr and aborts, which libFuzzer reports as a crash (and saves
// the input) and the corpus replay test (fuzz_replay_main.cc) as a failed test.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, ...)                                                            \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                 \
      std::fprintf(stderr, "\n");                                                        \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
