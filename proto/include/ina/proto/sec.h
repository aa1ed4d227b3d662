// Authenticated messages ([security] in proto/ina.toml, docs/security.md): the AES-128-GCM tag
// that replaces the CRC32C trailer in sec modes mac and mac_encrypt, the per-grant traffic keys
// and the nonce. One small library (ina::sec, OpenSSL's libcrypto underneath, wrapped here once)
// that the fabrics and the workers share, as they share ina::crc32c.
//
// A sealed message is header (kHeaderBytes), payload (count * kElemBytes), tag (kTagBytes). The
// tag authenticates the header, with the retx flag bit cleared (a retransmission changes nothing
// else, so it carries the same tag under the same nonce), and the payload; in mode mac_encrypt the
// payload is the GCM ciphertext. The 96-bit nonce is the header's rank and slot and the slot's
// `use`: its generation counted without wrapping since the grant began (gen is its low 16 bits).
// Each (key, rank, slot, use) seals one message only: the caller's contract, which the protocol
// keeps (a data block or a result is fixed once sent; see proto/ina.toml [security]).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ina/base/status.h"
#include "ina/proto/wire.h"

namespace ina::proto {

using TrafficKey = std::array<uint8_t, kKeyBytes>;
using Nonce = std::array<uint8_t, kNonceBytes>;

enum class KeyDirection : uint8_t {
  kUp,    // worker -> fabric (data)
  kDown,  // fabric -> worker (results)
  kJoin,  // a proven JOIN (worker -> fabric), under the session of its join_challenge's payload
};

// The keyed modes.
inline constexpr bool IsKeyed(SecMode mode) { return mode != SecMode::kCrc; }
inline constexpr bool IsValidSecMode(uint8_t sec) { return sec <= 2; }

// The traffic key of one grant of a job: HMAC-SHA256(secret, "ina/v2/" direction "/" job (2
// bytes, big-endian) grant (8 bytes) session), its first kKeyBytes. `grant`: the grants counted
// since the job began, 1 first; `session`: for data and results the fabric's session salt of the
// job's key (a Session, drawn when the fabric took the key and sent in every join_challenge; all
// zero for the admin channel's key), for a proven JOIN the join_challenge's whole payload (nonce |
// salt). InvalidArgument if the secret is shorter than kSecretMinBytes or longer than
// kSecretMaxBytes. Control path (allocates).
using Session = std::array<uint8_t, kSessionSaltBytes>;
Result<TrafficKey> DeriveTrafficKey(std::span<const uint8_t> secret, KeyDirection direction,
                                    uint16_t job, uint64_t grant, std::span<const uint8_t> session);

inline Nonce MakeNonce(uint16_t rank, uint16_t slot, uint64_t use) {
  Nonce n{};
  Store16(n.data(), rank);
  Store16(n.data() + 2, slot);
  for (int i = 0; i < 8; ++i) n[4 + i] = static_cast<uint8_t>(use >> (56 - 8 * i));
  return n;
}

// A secret from a file (a job secret, a fabric's admin secret): hex digits, whitespace around
// them ignored, kSecretMinBytes .. kSecretMaxBytes bytes. FailedPrecondition if group or others
// may access the file (it holds a secret: mode 0600 or stricter); InvalidArgument if it is not
// such hex; the errno's status if it cannot be read. `what` names it in errors
// ("--admin-key-file"). Never echoes the file's contents.
Result<std::vector<uint8_t>> LoadSecretFile(const std::string& path, std::string_view what);
// The same from an open file descriptor (read to its end; not closed): a pipe, or a file that
// only its owner may access (FailedPrecondition otherwise).
Result<std::vector<uint8_t>> LoadSecretFd(int fd, std::string_view what);
// A secret's hex text (whitespace around it ignored) into its bytes, kSecretMinBytes ..
// kSecretMaxBytes of them; InvalidArgument naming `what` otherwise. Wipes `text`; never echoes it.
Result<std::vector<uint8_t>> ParseSecretHex(std::string text, std::string_view what);

// The sequence of a set_key sent at wall-clock time t: milliseconds since the Unix epoch x
// kSetKeyAttemptsPerMs + attempt (< kSetKeyAttemptsPerMs), below 2^48 until the year 2109. A
// sender needs no state to make its sequences grow, and a fabric takes SetKeySequence(its start)
// as its floor, so a set_key recorded before it (re)started stays refused. The sender's clock must
// not run behind the fabric's by more than the time since the fabric started (NTP keeps them
// within milliseconds).
inline constexpr uint64_t kSetKeyAttemptsPerMs = 64;
uint64_t SetKeySequence(std::chrono::system_clock::time_point t, uint64_t attempt = 0);
// The sequence a set_key (or the set_key_ack echoing it) carries as seq_hi | seq_lo.
constexpr uint64_t SetKeySeq(const SetKeyMsg& m) { return (uint64_t{m.seq_hi} << 32) | m.seq_lo; }
constexpr uint64_t SetKeySeq(const SetKeyAckMsg& m) {
  return (uint64_t{m.seq_hi} << 32) | m.seq_lo;
}
// The set_key_ack of job `job`'s set_key of sequence `seq`.
constexpr SetKeyAckMsg SetKeyAck(uint16_t job, uint64_t seq) {
  return {
      .job = job, .seq_hi = static_cast<uint16_t>(seq >> 32), .seq_lo = static_cast<uint32_t>(seq)};
}
// The error(key_refused) answering job `job`'s set_key of sequence `seq`, whose sec mode `mode`
// the fabric cannot take (proto/ina.toml); and the sequence it echoes.
constexpr ErrorMsg SetKeyRefused(uint16_t job, uint64_t seq, uint16_t mode) {
  return ErrorMsg{.job = job, .code = ErrorCode::kKeyRefused}
      .set_join_param(JoinParam::kSecMode)
      .set_key_mode(mode)
      .set_key_seq_hi(static_cast<uint16_t>(seq >> 32))
      .set_key_seq_lo(static_cast<uint32_t>(seq));
}
constexpr uint64_t SetKeySeq(const ErrorMsg& m) {
  return (uint64_t{m.key_seq_hi()} << 32) | m.key_seq_lo();
}

// A set_key message (proto/ina.toml; docs/security.md, the admin channel): install `secret` (16 ..
// 64 bytes, a multiple of 4) for job `job` in `mode`, sealed in mode mac_encrypt under the admin
// key derived from `admin_secret`, sequence `seq` (< 2^48, growing from one set_key to the next;
// SetKeySequence).
// InvalidArgument for a bad secret, sequence or admin secret.
Result<std::vector<uint8_t>> SealSetKey(std::span<const uint8_t> admin_secret, uint16_t job,
                                        SecMode mode, std::span<const uint8_t> secret,
                                        uint64_t seq);

// A proven JOIN (proto/ina.toml, the join and join_challenge messages; docs/security.md, "JOIN
// proves knowledge of the key"). The fabric answers a JOIN of a keyed job with a join_challenge
// carrying a JoinChallenge (a fresh nonce and the job key's session salt); the worker answers with
// the same JOIN header, sec = mac, sealed under DeriveTrafficKey(secret, kJoin, job, grant 0,
// session = nonce | salt), GCM nonce rank | lane (the header's slot) | use 0: a message of
// kHeaderBytes + kTagBytes. A fresh nonce makes a fresh key, so the same header under two nonces
// never shares a (key, GCM nonce); the salt in the key means that a proof the fabric accepts was
// made with the salt the worker then derives its traffic keys with.
using JoinNonce = std::array<uint8_t, kJoinNonceBytes>;
struct JoinChallenge {
  JoinNonce nonce{};
  Session salt{};
  // From / into a join_challenge's payload (kJoinChallengeBytes): the nonce, then the salt.
  static JoinChallenge From(const uint8_t* payload);
  void EncodeTo(uint8_t* payload) const;
  bool operator==(const JoinChallenge&) const = default;
};

// Seals the JOIN header at msg[0, kHeaderBytes) (its sec must be mac) and writes the tag after it.
// InvalidArgument for a secret of the wrong length or a header that is no JOIN with sec mac;
// Internal if libcrypto fails.
Status SealJoinProof(std::span<const uint8_t> secret, const JoinChallenge& challenge, uint8_t* msg);
// True if `msg` (kHeaderBytes + kTagBytes: a JOIN with sec mac and its tag) is the JOIN proven
// under `secret` and `challenge`. The retx flag is not covered (a resend is the same proof).
bool JoinProofOk(std::span<const uint8_t> secret, const JoinChallenge& challenge,
                 std::span<const uint8_t> msg);

// The fabric's join nonce: HMAC-SHA256(fabric_secret, "ina/v2/join-nonce" | context), its first
// kJoinNonceBytes. `context` binds the nonce to what it answers (ina-switchd: the JOIN's header
// with sec and flags cleared, the sender's address and a time bucket), so the fabric keeps no
// state per challenge and recomputes the nonce when the proof comes. Control path.
JoinNonce MakeJoinNonce(std::span<const uint8_t> fabric_secret, std::span<const uint8_t> context);

// Cryptographically strong random bytes (libcrypto's RAND_bytes); Internal if it fails.
Status RandomBytes(std::span<uint8_t> out);

// Which AES-GCM implementation a MessageSealer or MessageOpener runs. kBest: ina's own where the
// CPU runs one (src/gcm_vaes.cc: VAES and VPCLMULQDQ on AVX-512, sixteen blocks at a time;
// src/gcm_aesni.cc: AES-NI and PCLMULQDQ, four), else libcrypto. The environment variable INA_GCM,
// read at each Create, can name another for kBest: `libcrypto`, `aesni` or `vaes_avx512` (a name
// this CPU cannot run is ignored): a fallback for operators, and what the side-by-side benchmark
// uses. kLibcrypto: OpenSSL's EVP always. All give the same bytes (tests/proto/sec_test.cc checks
// each against libcrypto and gen.py's known answers); the reference engine's SealOnce / OpenOnce
// are libcrypto's.
enum class GcmPath { kBest, kLibcrypto };

// One traffic key, ready to seal or to open messages (the AES key schedule is computed once, in
// Create). Sealing and opening are separate objects (GCM encrypts one way, decrypts the other):
// a fabric opens data with the up key and seals results with the down key; a worker the reverse.
// Not thread-safe: one per thread (the fast engine keeps its own per job). No allocation per
// message.
class MessageSealer {
 public:
  // Internal error if libcrypto cannot set up AES-128-GCM.
  static Result<std::unique_ptr<MessageSealer>> Create(const TrafficKey& key,
                                                       GcmPath path = GcmPath::kBest);
  // "vaes_avx512", "aesni" or "libcrypto": the implementation Create chose.
  const char* path_name() const;
  ~MessageSealer();
  MessageSealer(const MessageSealer&) = delete;
  MessageSealer& operator=(const MessageSealer&) = delete;

  // msg: header and payload (len = kHeaderBytes + 4 * count bytes), then room for kTagBytes. In
  // mode mac_encrypt the payload is encrypted in place. Writes the tag at msg + len. The header's
  // sec field is the caller's (it must be `mode`). REQUIRES: mode keyed, len >= kHeaderBytes.
  // Returns false only if libcrypto fails (never seen; the caller counts it and drops; ina's own
  // path never fails).
  bool Seal(SecMode mode, uint8_t* msg, size_t len, const Nonce& nonce);

 private:
  explicit MessageSealer(void* ctx) : ctx_(ctx) {}
  void* ctx_;  // sec.cc's GcmState
};

class MessageOpener {
 public:
  static Result<std::unique_ptr<MessageOpener>> Create(const TrafficKey& key,
                                                       GcmPath path = GcmPath::kBest);
  // "vaes_avx512", "aesni" or "libcrypto": the implementation Create chose.
  const char* path_name() const;
  ~MessageOpener();
  MessageOpener(const MessageOpener&) = delete;
  MessageOpener& operator=(const MessageOpener&) = delete;

  // msg: a whole sealed message (header, payload, tag). True if the tag verifies; then in mode
  // mac_encrypt the plaintext payload has been written to `plain` (msg.size() - kHeaderBytes -
  // kTagBytes bytes; REQUIRES room for them), in mode mac `plain` is untouched (the payload is
  // msg's own). False: forged, damaged, or another key or nonce (`plain` holds garbage).
  // REQUIRES: mode keyed, msg.size() >= kHeaderBytes + kTagBytes.
  bool Open(SecMode mode, std::span<const uint8_t> msg, const Nonce& nonce, uint8_t* plain);

 private:
  explicit MessageOpener(void* ctx) : ctx_(ctx) {}
  void* ctx_;  // sec.cc's GcmState
};

// One-shot forms, with a fresh context (and key schedule) per call: the reference engine's, so the
// oracle shares no state with the fast engine's long-lived contexts. Same contracts as above.
bool SealOnce(const TrafficKey& key, SecMode mode, uint8_t* msg, size_t len, const Nonce& nonce);
bool OpenOnce(const TrafficKey& key, SecMode mode, std::span<const uint8_t> msg, const Nonce& nonce,
              uint8_t* plain);

}  // namespace ina::proto
