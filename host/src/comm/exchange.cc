// Exchange: see exchange.h.
#include "exchange.h"

#include <algorithm>
#include <array>
#include <thread>
#include <vector>

#include "ina/proto/crc32c.h"
#include "progress.h"

namespace ina::host::internal {

Result<proto::Header> Exchange(Transport& t, const ExchangeSpec& spec) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::microseconds;
  const TxMessage tx{spec.request.data(), spec.request.size()};
  std::vector<uint8_t> bufs(kBurst * kRxBufBytes);
  std::array<RxMessage, kBurst> rx{};
  Status last_error;
  const auto start = Clock::now();
  const auto deadline = start + spec.timeout;
  auto next_send = start;
  while (true) {
    if (spec.cancel != nullptr && spec.cancel->load(std::memory_order_relaxed)) {
      return Aborted(spec.who + ": another lane failed");
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      std::string m = spec.who + ": " + spec.no_answer;
      if (!last_error.ok()) m += "; last transport error: " + last_error.ToString();
      return DeadlineExceeded(m);
    }
    if (now >= next_send) {
      auto r = t.SendBurst(std::span(&tx, 1));
      if (!r.ok()) {
        if (r.status().code() != StatusCode::kUnavailable) return r.status().WithContext(spec.who);
        last_error = r.status();
      }
      next_send = now + spec.resend;
    }
    const auto until = std::min(next_send, deadline);
    const auto wait = std::chrono::duration_cast<microseconds>(until - now);
    for (size_t i = 0; i < kBurst; ++i) rx[i] = {bufs.data() + i * kRxBufBytes, kRxBufBytes, 0};
    auto r = t.RecvBurst(std::span(rx.data(), kBurst), std::max(wait, microseconds(0)));
    if (!r.ok()) {
      if (r.status().code() != StatusCode::kUnavailable) return r.status().WithContext(spec.who);
      last_error = r.status();  // the fabric is not up (yet): wait for the next resend
      std::this_thread::sleep_until(until);
      continue;
    }
    for (size_t i = 0; i < *r; ++i) {
      if (rx[i].len < proto::kHeaderBytes) continue;
      if (!proto::MessageCrcOk({rx[i].data, rx[i].len})) continue;  // damaged: the resend fixes it
      const proto::Header a = proto::DecodeHeader(rx[i].data);
      if (a.version == proto::kVersion && spec.is_reply(a)) return a;
    }
  }
}

}  // namespace ina::host::internal
