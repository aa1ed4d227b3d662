// ina-mpi-bench: the OpenMPI baseline of the testbed. Every rank all-reduces (MPI_SUM of float32,
// MPI_Allreduce in place, whatever algorithm the MPI library picks) the same deterministic data
// ina-bench uses (ina::bench::MakeFloatInput(seed, rank, n)); rank 0 rebuilds every rank's input,
// checks its result against the float64 sum, and prints one JSON line.
//
//   mpirun -np N [mpirun options] ina-mpi-bench [--elements E] [--iters I] [--seed S]
//
// Time per iteration: the slowest rank's, each iteration started after a barrier; reported as the
// median over iterations, like ina-bench. The check: a float sum of N terms in any order is
// within (N - 1) 2^-24 sum_r |x_r| of the exact sum (plus one rounding of the result), so each
// element must satisfy |out - S| <= N 2^-24 (sum_r |x_r|) + 1e-30. Exit status 0 iff verified.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ina/base/parse.h"
#include "verify.h"

namespace {

using Clock = std::chrono::steady_clock;

int Run(int argc, char** argv) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  long long elements = 1 << 20;
  int iters = 5;
  unsigned long long seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      if (rank == 0) {
        std::printf("usage: mpirun -np N ina-mpi-bench [--elements E] [--iters I] [--seed S]\n");
      }
      return 0;
    }
    if (!v) {
      if (rank == 0) std::fprintf(stderr, "ina-mpi-bench: %s needs a value\n", a.c_str());
      return 2;
    }
    ++i;
    ina::Status st = ina::InvalidArgument("unknown option '" + a + "'");
    if (a == "--elements") {
      auto x = ina::ParseInt(a, v, 0, 1ll << 31);
      st = x.status();
      if (x.ok()) elements = *x;
    } else if (a == "--iters") {
      auto x = ina::ParseInt(a, v, 1, 1000);
      st = x.status();
      if (x.ok()) iters = static_cast<int>(*x);
    } else if (a == "--seed") {
      auto x = ina::ParseUint(a, v, 0, UINT64_MAX);
      st = x.status();
      if (x.ok()) seed = *x;
    }
    if (!st.ok()) {
      if (rank == 0) std::fprintf(stderr, "ina-mpi-bench: %s\n", st.message().c_str());
      return 2;
    }
  }
  const size_t n = static_cast<size_t>(elements);
  const std::vector<float> in = ina::bench::MakeFloatInput(seed, rank, n);
  std::vector<float> buf(in);
  const int count = static_cast<int>(n);

  MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  // warm-up
  std::vector<double> ms(iters);
  for (int it = 0; it < iters; ++it) {
    std::copy(in.begin(), in.end(), buf.begin());
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = Clock::now();
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    MPI_Allreduce(&mine, &ms[it], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  // Every rank's fingerprint, to say whether the results are bit-identical everywhere.
  unsigned long long fp = ina::bench::Fingerprint(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buf.data()), n * sizeof(float)));
  std::vector<unsigned long long> fps(world);
  MPI_Gather(&fp, 1, MPI_UNSIGNED_LONG_LONG, fps.data(), 1, MPI_UNSIGNED_LONG_LONG, 0,
             MPI_COMM_WORLD);
  if (rank != 0) return 0;

  std::vector<double> sum(n, 0), abs_sum(n, 0);
  for (int r = 0; r < world; ++r) {
    const auto x = ina::bench::MakeFloatInput(seed, r, n);
    for (size_t i = 0; i < n; ++i) {
      sum[i] += x[i];
      abs_sum[i] += std::fabs(static_cast<double>(x[i]));
    }
  }
  bool within = true;
  double max_err = 0, max_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(static_cast<double>(buf[i]) - sum[i]);
    within &= err <= world * std::ldexp(abs_sum[i], -24) + 1e-30;
    max_err = std::max(max_err, err);
    max_sum = std::max(max_sum, std::fabs(sum[i]));
  }
  const bool identical = std::all_of(fps.begin(), fps.end(), [&](auto f) { return f == fps[0]; });
  std::sort(ms.begin(), ms.end());
  const double median = iters % 2 ? ms[iters / 2] : (ms[iters / 2 - 1] + ms[iters / 2]) / 2;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string lib(version, static_cast<size_t>(len));
  lib = lib.substr(0, lib.find_first_of(",\n"));
  std::printf(
      "{\"workers\": %d, \"elements\": %zu, \"dtype\": \"float\", \"iters\": %d, "
      "\"mpi_ms_median\": %.4f, \"max_rel_err\": %.4g, \"within_bound\": %s, "
      "\"bit_identical\": %s, \"verified\": %s, \"mpi_library\": \"%s\"}\n",
      world, n, iters, median, max_sum > 0 ? max_err / max_sum : 0.0, within ? "true" : "false",
      identical ? "true" : "false", within ? "true" : "false", lib.c_str());
  std::fflush(stdout);
  return within ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = Run(argc, argv);
  // A rank that fails alone must not leave the others waiting in a collective.
  if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
  return rc;
}
