// AES-128-GCM message tags through OpenSSL's libcrypto (sec.h). Every libcrypto call of ina lives
// here, so its error conventions (1 for success, <= 0 otherwise) never leak.
#include "ina/proto/sec.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "gcm_internal.h"

namespace ina::proto {
namespace {

// The header as the tag covers it: the retx flag cleared.
void AadHeader(const uint8_t* msg, uint8_t* out) {
  std::memcpy(out, msg, kHeaderBytes);
  out[kFlagsOffset] &= static_cast<uint8_t>(~flags::kRetx);
}

// A context for AES-128-GCM with `key`, for encrypting (sealing) or decrypting (opening).
EVP_CIPHER_CTX* NewGcm(const TrafficKey& key, bool encrypt) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx == nullptr) return nullptr;
  const int ok = encrypt ? EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key.data(), nullptr)
                         : EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key.data(), nullptr);
  if (ok != 1 || EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(kNonceBytes),
                                     nullptr) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

bool SealWith(EVP_CIPHER_CTX* ctx, SecMode mode, uint8_t* msg, size_t len, const Nonce& nonce) {
  uint8_t aad[kHeaderBytes];
  AadHeader(msg, aad);
  int n = 0;
  if (EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) != 1) return false;
  if (EVP_EncryptUpdate(ctx, nullptr, &n, aad, static_cast<int>(kHeaderBytes)) != 1) return false;
  uint8_t* payload = msg + kHeaderBytes;
  const int payload_len = static_cast<int>(len - kHeaderBytes);
  if (payload_len > 0) {
    // mac: the payload is associated data too; mac_encrypt: it is encrypted in place.
    if (mode == SecMode::kMac) {
      if (EVP_EncryptUpdate(ctx, nullptr, &n, payload, payload_len) != 1) return false;
    } else if (EVP_EncryptUpdate(ctx, payload, &n, payload, payload_len) != 1) {
      return false;
    }
  }
  if (EVP_EncryptFinal_ex(ctx, payload + payload_len, &n) != 1) return false;
  return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), msg + len) ==
         1;
}

bool OpenWith(EVP_CIPHER_CTX* ctx, SecMode mode, std::span<const uint8_t> msg, const Nonce& nonce,
              uint8_t* plain) {
  const size_t len = msg.size() - kTagBytes;
  uint8_t aad[kHeaderBytes];
  AadHeader(msg.data(), aad);
  uint8_t tag[kTagBytes];
  std::memcpy(tag, msg.data() + len, kTagBytes);
  int n = 0;
  if (EVP_DecryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) != 1) return false;
  if (EVP_DecryptUpdate(ctx, nullptr, &n, aad, static_cast<int>(kHeaderBytes)) != 1) return false;
  const uint8_t* payload = msg.data() + kHeaderBytes;
  const int payload_len = static_cast<int>(len - kHeaderBytes);
  if (payload_len > 0) {
    if (mode == SecMode::kMac) {
      if (EVP_DecryptUpdate(ctx, nullptr, &n, payload, payload_len) != 1) return false;
    } else if (EVP_DecryptUpdate(ctx, plain, &n, payload, payload_len) != 1) {
      return false;
    }
  }
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), tag) != 1) {
    return false;
  }
  // The tag comparison inside is constant-time.
  uint8_t none[16];
  return EVP_DecryptFinal_ex(ctx, mode == SecMode::kMac ? none : plain + payload_len, &n) == 1;
}

}  // namespace

Result<TrafficKey> DeriveTrafficKey(std::span<const uint8_t> secret, KeyDirection direction,
                                    uint16_t job, uint64_t grant,
                                    std::span<const uint8_t> session) {
  if (secret.size() < kSecretMinBytes || secret.size() > kSecretMaxBytes) {
    return InvalidArgument("job secret of " + std::to_string(secret.size()) + " bytes; it has " +
                           std::to_string(kSecretMinBytes) + " .. " +
                           std::to_string(kSecretMaxBytes));
  }
  std::string info = "ina/v2/";
  info += direction == KeyDirection::kUp     ? kKdfUp
          : direction == KeyDirection::kDown ? kKdfDown
                                             : kKdfJoin;
  info += '/';
  uint8_t num[10];
  Store16(num, job);
  for (int i = 0; i < 8; ++i) num[2 + i] = static_cast<uint8_t>(grant >> (56 - 8 * i));
  info.append(reinterpret_cast<const char*>(num), sizeof(num));
  info.append(reinterpret_cast<const char*>(session.data()), session.size());
  uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const uint8_t*>(info.data()), info.size(), mac, &mac_len) == nullptr ||
      mac_len < kKeyBytes) {
    return Internal("HMAC-SHA256 failed in libcrypto");
  }
  TrafficKey key;
  std::memcpy(key.data(), mac, kKeyBytes);
  OPENSSL_cleanse(mac, sizeof(mac));
  return key;
}

Result<std::vector<uint8_t>> ParseSecretHex(std::string text, std::string_view what) {
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto last = text.find_last_not_of(" \t\r\n");
  const std::string_view digits = first == std::string::npos
                                      ? std::string_view()
                                      : std::string_view(text).substr(first, last - first + 1);
  std::vector<uint8_t> secret;
  secret.reserve(digits.size() / 2);
  bool hex = digits.size() % 2 == 0;
  for (size_t i = 0; hex && i < digits.size(); i += 2) {
    auto nibble = [](char ch) {
      return ch >= '0' && ch <= '9'   ? ch - '0'
             : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
             : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                      : -1;
    };
    const int hi = nibble(digits[i]), lo = nibble(digits[i + 1]);
    hex = hi >= 0 && lo >= 0;
    if (hex) secret.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  OPENSSL_cleanse(text.data(), text.size());
  if (!hex || secret.size() < kSecretMinBytes || secret.size() > kSecretMaxBytes) {
    OPENSSL_cleanse(secret.data(), secret.size());
    return InvalidArgument(std::string(what) + ": not " + std::to_string(2 * kSecretMinBytes) +
                           " .. " + std::to_string(2 * kSecretMaxBytes) + " hex digits" +
                           (hex ? " (" + std::to_string(secret.size()) + " bytes)" : ""));
  }
  return secret;
}

Result<std::vector<uint8_t>> LoadSecretFile(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(std::string(what) + " " + path, errno);
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return FailedPrecondition(std::string(what) + " " + path +
                              ": group or others may access it; it holds a secret (chmod 600)");
  }
  std::ifstream in(path);
  if (!in) return ErrnoStatus(std::string(what) + " " + path, errno);
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseSecretHex(ss.str(), std::string(what) + " " + path);
}

Result<std::vector<uint8_t>> LoadSecretFd(int fd, std::string_view what) {
  const std::string name = std::string(what) + " fd:" + std::to_string(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus(name, errno);
  if (S_ISREG(st.st_mode) && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return FailedPrecondition(name +
                              ": a file group or others may access; it holds a secret (chmod 600)");
  }
  std::string text;
  char buf[256];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      OPENSSL_cleanse(text.data(), text.size());
      return ErrnoStatus(name, err);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > 4 * kSecretMaxBytes) break;  // more than any secret: refused below
  }
  OPENSSL_cleanse(buf, sizeof(buf));
  return ParseSecretHex(std::move(text), name);
}

uint64_t SetKeySequence(std::chrono::system_clock::time_point t, uint64_t attempt) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  return static_cast<uint64_t>(ms.count()) * kSetKeyAttemptsPerMs + attempt;
}

Result<std::vector<uint8_t>> SealSetKey(std::span<const uint8_t> admin_secret, uint16_t job,
                                        SecMode mode, std::span<const uint8_t> secret,
                                        uint64_t seq) {
  if (secret.size() % kElemBytes != 0 || secret.size() < kSecretMinBytes ||
      secret.size() > kSecretMaxBytes) {
    return InvalidArgument("set_key: a secret of " + std::to_string(secret.size()) +
                           " bytes; it has 16 .. 64, a multiple of 4");
  }
  if (seq >> 48) return InvalidArgument("set_key: sequence above 2^48");
  INA_ASSIGN_OR_RETURN(const TrafficKey key,
                       DeriveTrafficKey(admin_secret, KeyDirection::kUp, 0, 0, Session{}));
  std::vector<uint8_t> b(
      MessageBytes(secret.size() / kElemBytes, static_cast<uint8_t>(SecMode::kMacEncrypt)));
  SetKeyMsg{.sec = static_cast<uint8_t>(SecMode::kMacEncrypt),
            .job = job,
            .seq_hi = static_cast<uint16_t>(seq >> 32),
            .count = static_cast<uint16_t>(secret.size() / kElemBytes),
            .seq_lo = static_cast<uint32_t>(seq),
            .mode = static_cast<uint16_t>(mode)}
      .Encode(b.data());
  std::memcpy(b.data() + kHeaderBytes, secret.data(), secret.size());
  if (!SealOnce(key, SecMode::kMacEncrypt, b.data(), b.size() - kTagBytes, MakeNonce(0, 0, seq))) {
    return Internal("libcrypto: sealing set_key failed");
  }
  return b;
}

namespace {

bool IsProvenJoinHeader(const uint8_t* msg) {
  return GetVersion(msg) == kVersion && IsType(msg, MsgType::kJoin) &&
         GetSec(msg) == static_cast<uint8_t>(SecMode::kMac);
}

// A proven JOIN's key: the session is the challenge's payload, nonce | salt.
Result<TrafficKey> JoinKey(std::span<const uint8_t> secret, uint16_t job,
                           const JoinChallenge& challenge) {
  std::array<uint8_t, kJoinChallengeBytes> session;
  challenge.EncodeTo(session.data());
  return DeriveTrafficKey(secret, KeyDirection::kJoin, job, 0, session);
}

}  // namespace

JoinChallenge JoinChallenge::From(const uint8_t* payload) {
  JoinChallenge c;
  std::memcpy(c.nonce.data(), payload, c.nonce.size());
  std::memcpy(c.salt.data(), payload + c.nonce.size(), c.salt.size());
  return c;
}

void JoinChallenge::EncodeTo(uint8_t* payload) const {
  std::memcpy(payload, nonce.data(), nonce.size());
  std::memcpy(payload + nonce.size(), salt.data(), salt.size());
}

Status SealJoinProof(std::span<const uint8_t> secret, const JoinChallenge& challenge,
                     uint8_t* msg) {
  if (!IsProvenJoinHeader(msg))
    return InvalidArgument("join proof: the header is no JOIN, sec mac");
  INA_ASSIGN_OR_RETURN(const TrafficKey key, JoinKey(secret, GetJob(msg), challenge));
  if (!SealOnce(key, SecMode::kMac, msg, kHeaderBytes, MakeNonce(GetRank(msg), GetSlot(msg), 0))) {
    return Internal("libcrypto: sealing a JOIN failed");
  }
  return Status::Ok();
}

bool JoinProofOk(std::span<const uint8_t> secret, const JoinChallenge& challenge,
                 std::span<const uint8_t> msg) {
  if (msg.size() != kHeaderBytes + kTagBytes || !IsProvenJoinHeader(msg.data())) return false;
  const auto key = JoinKey(secret, GetJob(msg.data()), challenge);
  if (!key.ok()) return false;
  return OpenOnce(*key, SecMode::kMac, msg, MakeNonce(GetRank(msg.data()), GetSlot(msg.data()), 0),
                  nullptr);
}

JoinNonce MakeJoinNonce(std::span<const uint8_t> fabric_secret, std::span<const uint8_t> context) {
  static constexpr std::string_view kLabel = "ina/v2/join-nonce";
  std::vector<uint8_t> in(kLabel.begin(), kLabel.end());
  in.insert(in.end(), context.begin(), context.end());
  uint8_t mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  JoinNonce n{};
  if (HMAC(EVP_sha256(), fabric_secret.data(), static_cast<int>(fabric_secret.size()), in.data(),
           in.size(), mac, &mac_len) != nullptr &&
      mac_len >= n.size()) {
    std::memcpy(n.data(), mac, n.size());
  }  // else all zero (libcrypto failed: never seen)
  OPENSSL_cleanse(mac, sizeof(mac));
  return n;
}

Status RandomBytes(std::span<uint8_t> out) {
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) {
    return Internal("libcrypto: RAND_bytes failed (no entropy?)");
  }
  return Status::Ok();
}

namespace {

// A sealer's or opener's state: ina's own AES-GCM (`fast` and its expanded key), or libcrypto's
// context.
struct GcmState {
  const internal::GcmVariant* fast = nullptr;
  internal::GcmKey key{};
  EVP_CIPHER_CTX* evp = nullptr;
  const char* name() const { return fast != nullptr ? fast->name : "libcrypto"; }
  ~GcmState() {
    OPENSSL_cleanse(&key, sizeof(key));
    EVP_CIPHER_CTX_free(evp);
  }
};

GcmState* State(void* p) { return static_cast<GcmState*>(p); }

// kBest's choice: INA_GCM (libcrypto, or a variant this CPU runs, by name), else the best.
const internal::GcmVariant* ChooseGcm(GcmPath path) {
  if (path == GcmPath::kLibcrypto) return nullptr;
  static const internal::GcmVariantList list = internal::GcmVariants();
  const char* forced = std::getenv("INA_GCM");
  if (forced != nullptr) {
    const std::string_view name(forced);
    if (name == "libcrypto") return nullptr;
    if (const internal::GcmVariant* v = list.Find(name)) return v;
  }
  return list.size > 0 ? &list.best() : nullptr;
}

Result<std::unique_ptr<GcmState>> MakeState(const TrafficKey& key, GcmPath path, bool encrypt) {
  auto st = std::make_unique<GcmState>();
  st->fast = ChooseGcm(path);
  if (st->fast != nullptr) {
    st->fast->init(&st->key, key);
    return st;
  }
  st->evp = NewGcm(key, encrypt);
  if (st->evp == nullptr) return Internal("libcrypto: cannot set up AES-128-GCM");
  return st;
}

}  // namespace

Result<std::unique_ptr<MessageSealer>> MessageSealer::Create(const TrafficKey& key, GcmPath path) {
  INA_ASSIGN_OR_RETURN(std::unique_ptr<GcmState> st, MakeState(key, path, /*encrypt=*/true));
  return std::unique_ptr<MessageSealer>(new MessageSealer(st.release()));
}

MessageSealer::~MessageSealer() { delete State(ctx_); }

const char* MessageSealer::path_name() const { return State(ctx_)->name(); }

bool MessageSealer::Seal(SecMode mode, uint8_t* msg, size_t len, const Nonce& nonce) {
  const GcmState& st = *State(ctx_);
  if (st.fast == nullptr) return SealWith(st.evp, mode, msg, len, nonce);
  st.fast->seal(st.key, mode, msg, len, nonce);
  return true;
}

Result<std::unique_ptr<MessageOpener>> MessageOpener::Create(const TrafficKey& key, GcmPath path) {
  INA_ASSIGN_OR_RETURN(std::unique_ptr<GcmState> st, MakeState(key, path, /*encrypt=*/false));
  return std::unique_ptr<MessageOpener>(new MessageOpener(st.release()));
}

MessageOpener::~MessageOpener() { delete State(ctx_); }

const char* MessageOpener::path_name() const { return State(ctx_)->name(); }

bool MessageOpener::Open(SecMode mode, std::span<const uint8_t> msg, const Nonce& nonce,
                         uint8_t* plain) {
  const GcmState& st = *State(ctx_);
  if (st.fast == nullptr) return OpenWith(st.evp, mode, msg, nonce, plain);
  return st.fast->open(st.key, mode, msg, nonce, plain);
}

bool SealOnce(const TrafficKey& key, SecMode mode, uint8_t* msg, size_t len, const Nonce& nonce) {
  EVP_CIPHER_CTX* ctx = NewGcm(key, true);
  if (ctx == nullptr) return false;
  const bool ok = SealWith(ctx, mode, msg, len, nonce);
  EVP_CIPHER_CTX_free(ctx);
  return ok;
}

bool OpenOnce(const TrafficKey& key, SecMode mode, std::span<const uint8_t> msg, const Nonce& nonce,
              uint8_t* plain) {
  EVP_CIPHER_CTX* ctx = NewGcm(key, false);
  if (ctx == nullptr) return false;
  const bool ok = OpenWith(ctx, mode, msg, nonce, plain);
  EVP_CIPHER_CTX_free(ctx);
  return ok;
}

}  // namespace ina::proto
