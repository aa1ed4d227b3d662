#include "verify.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "ina/host/quant.h"
#include "ina/proto/wire.h"

namespace ina::bench {

namespace {
std::mt19937_64 Rng(uint64_t seed, int rank) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(rank), 0x1A5u};
  return std::mt19937_64(seq);
}
}  // namespace

std::vector<float> MakeFloatInput(uint64_t seed, int rank, size_t n) {
  auto rng = Rng(seed, rank);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale_exp(-20, 6);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> x(n);
  // Per 64 elements a scale, so blocks of every K see different exponents across ranks.
  for (size_t i = 0; i < n; i += 64) {
    int kind = pick(rng);
    float scale = std::ldexp(1.0f, scale_exp(rng));
    for (size_t j = i; j < std::min(n, i + 64); ++j) {
      if (kind < 3)
        x[j] = 0.0f;  // zero run
      else if (kind < 6)
        x[j] = static_cast<float>(pick(rng) - 50);  // small integers
      else
        x[j] = normal(rng) * scale;
    }
  }
  return x;
}

std::vector<int32_t> MakeIntInput(uint64_t seed, int rank, size_t n, bool wrap) {
  auto rng = Rng(seed ^ 0x5EED, rank);
  std::uniform_int_distribution<int32_t> d(-(1 << 20), 1 << 20);
  std::vector<int32_t> x(n);
  for (auto& v : x) v = d(rng);
  if (wrap) {
    for (size_t i = 0; i < n; i += 7) x[i] = (i / 7) % 2 ? INT32_MAX : INT32_MIN;
  }
  return x;
}

FloatExpectation ExpectFloat(const std::vector<std::vector<float>>& inputs, int k) {
  const auto& q = host::quant::ScalarKernels();
  const int world = static_cast<int>(inputs.size());
  const size_t n = inputs.empty() ? 0 : inputs[0].size();
  const int precision = host::quant::Precision(world);
  FloatExpectation e;
  e.exact.resize(n);
  e.sum64.assign(n, 0.0);
  e.bound.resize(n);
  std::vector<uint8_t> wire(static_cast<size_t>(k) * 4);
  std::vector<float> deq(k);
  std::vector<int64_t> acc(k);
  for (size_t start = 0; start < n; start += k) {
    const size_t len = std::min<size_t>(k, n - start);
    uint8_t exp = 0;
    bool nonfinite = false;
    for (const auto& in : inputs) {
      bool nf = false;
      exp = std::max(exp, q.block_exp(in.data() + start, len, &nf));
      nonfinite |= nf;
    }
    std::fill(acc.begin(), acc.end(), 0);
    for (const auto& in : inputs) {
      q.quantize(in.data() + start, len, exp, precision, wire.data());
      for (size_t i = 0; i < len; ++i) {
        acc[i] += static_cast<int32_t>(proto::Load32(wire.data() + 4 * i));
        e.sum64[start + i] += static_cast<double>(in[start + i]);
      }
    }
    for (size_t i = 0; i < len; ++i) {
      proto::Store32(wire.data() + 4 * i, static_cast<uint32_t>(static_cast<int32_t>(acc[i])));
    }
    q.dequantize(wire.data(), len, exp, precision, e.exact.data() + start);
    const int E = static_cast<int>(exp) - proto::kExpBias;
    const double quant_err = world * std::ldexp(1.0, E - precision - 1);
    for (size_t i = 0; i < len; ++i) {
      if (nonfinite) e.exact[start + i] = std::numeric_limits<float>::quiet_NaN();
      e.bound[start + i] = quant_err + std::ldexp(std::fabs(e.sum64[start + i]) + quant_err, -24);
    }
  }
  return e;
}

std::vector<int32_t> ExpectInt(const std::vector<std::vector<int32_t>>& inputs) {
  std::vector<int32_t> out(inputs.empty() ? 0 : inputs[0].size(), 0);
  for (const auto& in : inputs) {
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<int32_t>(static_cast<uint32_t>(out[i]) + static_cast<uint32_t>(in[i]));
    }
  }
  return out;
}

void AverageExpectation(FloatExpectation* e, int world) {
  const float d = static_cast<float>(world);
  for (size_t i = 0; i < e->exact.size(); ++i) {
    e->exact[i] /= d;
    e->sum64[i] /= world;
    const double q = std::fabs(static_cast<double>(e->exact[i]));
    e->bound[i] = e->bound[i] / world + std::max(std::ldexp(q, -24), std::ldexp(1.0, -150));
  }
}

void AverageInt(std::vector<int32_t>* sums, int world) {
  for (int32_t& v : *sums) v /= world;
}

FloatCheck CheckFloat(std::span<const float> out, const FloatExpectation& expected) {
  FloatCheck c;
  if (out.size() != expected.exact.size()) {
    c.exact = c.within_bound = false;
    c.first_bad = 0;
    c.detail =
        "length " + std::to_string(out.size()) + " != " + std::to_string(expected.exact.size());
    return c;
  }
  double max_abs_sum = 0, max_err = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const bool same_bits = std::memcmp(&out[i], &expected.exact[i], sizeof(float)) == 0;
    const double err = std::fabs(static_cast<double>(out[i]) - expected.sum64[i]);
    const bool nan_expected = std::isnan(expected.exact[i]);
    const bool in_bound = nan_expected ? std::isnan(out[i]) : err <= expected.bound[i];
    if (!nan_expected) {
      max_abs_sum = std::max(max_abs_sum, std::fabs(expected.sum64[i]));
      max_err = std::max(max_err, err);
    }
    if ((!same_bits || !in_bound) && c.first_bad == SIZE_MAX) {
      c.first_bad = i;
      c.detail = "element " + std::to_string(i) + ": got " + std::to_string(out[i]) + ", exact " +
                 std::to_string(expected.exact[i]) + ", float64 sum " +
                 std::to_string(expected.sum64[i]) + ", bound " + std::to_string(expected.bound[i]);
    }
    c.exact &= same_bits;
    c.within_bound &= in_bound;
  }
  c.max_rel_err = max_abs_sum > 0 ? max_err / max_abs_sum : max_err;
  return c;
}

uint64_t Fingerprint(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace ina::bench
