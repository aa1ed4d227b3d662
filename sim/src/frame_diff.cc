#include "ina/sim/frame_diff.h"

#include <algorithm>
#include <cstdio>

#include "ina/proto/wire.h"

namespace ina::sim {

namespace p = ::ina::proto;

namespace {

std::string Hex(std::span<const uint8_t> b, size_t from, size_t n) {
  std::string s;
  char x[4];
  for (size_t i = from; i < std::min(b.size(), from + n); ++i) {
    std::snprintf(x, sizeof(x), "%02x", b[i]);
    s += x;
  }
  return s;
}

std::string Side(const char* name, const ResultFrame* f, bool group) {
  if (f == nullptr) return std::string("  ") + name + ": (no result)";
  char head[128];
  std::snprintf(head, sizeof(head), "  %s: %zu bytes, dest_rank=%u", name, f->packet.size(),
                f->dest_rank);
  std::string s = head;
  if (group) s += " group=" + std::to_string(f->group);
  if (f->cycle != 0) s += " cycle=" + std::to_string(f->cycle);
  return s + "\n    " + DescribeHeader(f->packet);
}

}  // namespace

std::string DescribeHeader(std::span<const uint8_t> packet) {
  if (packet.size() < p::kHeaderBytes) {
    return "short packet (" + std::to_string(packet.size()) +
           " bytes): " + Hex(packet, 0, packet.size());
  }
  const p::Header h = p::DecodeHeader(packet.data());
  const uint64_t values[] = {h.version,  static_cast<uint8_t>(h.type),
                             h.flags,    h.exp,
                             h.next_exp, h.sec,
                             h.job,      h.rank,
                             h.slot,     h.gen,
                             h.count,    h.offset,
                             h.aux};
  static_assert(std::size(values) == p::kHeaderFields.size(), "a field of ina.toml is missing");
  std::string s;
  for (size_t i = 0; i < p::kHeaderFields.size(); ++i) {
    const auto& f = p::kHeaderFields[i];
    if (i != 0) s += ' ';
    s += std::string(f.name) + "=" + std::to_string(values[i]);
    if (f.offset == p::kTypeOffset) s += "(" + std::string(p::MsgTypeName(h.type)) + ")";
  }
  return s;
}

std::string NameByte(size_t offset, size_t size) {
  if (offset < p::kHeaderBytes) {
    for (const auto& f : p::kHeaderFields) {
      if (offset >= f.offset && offset < f.offset + f.bytes) {
        return f.bytes == 1 ? std::string(f.name)
                            : std::string(f.name) + "[" + std::to_string(offset - f.offset) + "]";
      }
    }
    return "header byte " + std::to_string(offset);
  }
  if (size >= p::kCrcBytes && offset >= size - p::kCrcBytes) {
    return "crc[" + std::to_string(offset - (size - p::kCrcBytes)) + "]";
  }
  const size_t e = offset - p::kHeaderBytes;
  return "elem " + std::to_string(e / p::kElemBytes) + " byte " + std::to_string(e % p::kElemBytes);
}

std::optional<FrameMismatch> FirstMismatch(std::span<const ResultFrame> rtl,
                                           std::span<const ResultFrame> ref,
                                           const DiffOptions& options) {
  const size_t n = std::max(rtl.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    const ResultFrame* a = i < rtl.size() ? &rtl[i] : nullptr;
    const ResultFrame* b = i < ref.size() ? &ref[i] : nullptr;
    if (a != nullptr && b != nullptr && a->packet == b->packet && a->dest_rank == b->dest_rank &&
        (!options.compare_group || a->group == b->group)) {
      continue;
    }
    FrameMismatch m;
    m.index = i;
    m.cycle = a != nullptr ? a->cycle : (rtl.empty() ? 0 : rtl.back().cycle);
    std::string r;
    if (!options.context.empty()) r += options.context + "\n";
    r += "first differing result: #" + std::to_string(i) + " (RTL " + std::to_string(rtl.size()) +
         " results, reference " + std::to_string(ref.size()) + "), cycle " +
         std::to_string(m.cycle) + ", INA_SEED=" + std::to_string(options.seed) + "\n";
    r += Side("rtl", a, options.compare_group) + "\n";
    r += Side("ref", b, options.compare_group);
    if (a != nullptr && b != nullptr) {
      if (a->dest_rank != b->dest_rank) r += "\n  dest_rank differs";
      if (options.compare_group && a->group != b->group) r += "\n  group differs";
      if (a->packet.size() != b->packet.size()) r += "\n  lengths differ";
      size_t listed = 0, more = 0;
      std::string bytes;
      for (size_t k = 0; k < std::min(a->packet.size(), b->packet.size()); ++k) {
        if (a->packet[k] == b->packet[k]) continue;
        if (listed == options.max_bytes) {
          ++more;
          continue;
        }
        char x[96];
        std::snprintf(x, sizeof(x), "\n    byte %zu (%s): rtl %02x ref %02x", k,
                      NameByte(k, b->packet.size()).c_str(), a->packet[k], b->packet[k]);
        bytes += x;
        ++listed;
      }
      if (listed != 0) r += "\n  bytes differ:" + bytes;
      if (more != 0) r += "\n    ... " + std::to_string(more) + " more";
    }
    m.report = std::move(r);
    return m;
  }
  return std::nullopt;
}

}  // namespace ina::sim
