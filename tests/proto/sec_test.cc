// The AES-GCM tags of keyed jobs (ina/proto/sec.h) against gen.py's known answers (sec_kat.txt:
// its own AES and GHASH in Python, independent of libcrypto), and what a tag must refuse.
#include "ina/proto/sec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "kat_file.h"
#include "support/seed.h"

namespace ina::proto {
namespace {

struct SecKat {
  std::string name;
  std::vector<uint8_t> bytes;  // the sealed message
  std::map<std::string, std::string> fields;
};

std::vector<SecKat> LoadSecKats() {
  std::ifstream in(INA_SEC_KAT_FILE);
  EXPECT_TRUE(in.good()) << "cannot open " << INA_SEC_KAT_FILE;
  std::vector<SecKat> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    SecKat k;
    std::string hex, tok;
    ss >> k.name >> hex;
    k.bytes = FromHex(hex);
    while (ss >> tok) {
      const auto eq = tok.find('=');
      k.fields[tok.substr(0, eq)] = tok.substr(eq + 1);
    }
    out.push_back(std::move(k));
  }
  return out;
}

// A traffic key's session: a Session (kSessionSaltBytes), or a proven JOIN's nonce | salt.
std::vector<uint8_t> SessionOf(const std::string& hex) {
  const auto b = FromHex(hex);
  EXPECT_TRUE(b.size() == kSessionSaltBytes || b.size() == kJoinChallengeBytes) << hex;
  return b;
}

// The [[kat]] the sealed vector was made from, without its CRC trailer, sec set to `mode`.
std::vector<uint8_t> PlainMessage(const std::string& kat, uint8_t mode) {
  for (const auto& k : LoadKats()) {
    if (k.name != kat) continue;
    std::vector<uint8_t> m(k.bytes.begin(), k.bytes.end() - kCrcBytes);
    SetSec(m.data(), mode);
    return m;
  }
  ADD_FAILURE() << "no [[kat]] " << kat;
  return {};
}

// gen.py's vectors through libcrypto (SealOnce, OpenOnce) and through the long-lived sealer and
// opener, ina's own AES-GCM on a CPU with AES-NI.
TEST(SecKat, BothPathsMatchGenPy) {
  const auto kats = LoadSecKats();
  ASSERT_GE(kats.size(), 2u);
  bool saw_mac = false, saw_encrypt = false;
  for (const auto& k : kats) {
    SCOPED_TRACE(k.name);
    const auto mode = static_cast<SecMode>(std::stoi(k.fields.at("mode")));
    saw_mac |= mode == SecMode::kMac;
    saw_encrypt |= mode == SecMode::kMacEncrypt;
    const auto secret = FromHex(k.fields.at("secret"));
    const auto plain = PlainMessage(k.fields.at("kat"), static_cast<uint8_t>(mode));
    const uint16_t job = GetJob(plain.data());
    const std::string& d = k.fields.at("dir");
    const auto dir = d == kKdfUp     ? KeyDirection::kUp
                     : d == kKdfJoin ? KeyDirection::kJoin
                                     : KeyDirection::kDown;
    auto key = DeriveTrafficKey(secret, dir, job, std::stoull(k.fields.at("grant")),
                                SessionOf(k.fields.at("session")));
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    const auto want_key = FromHex(k.fields.at("key"));
    EXPECT_EQ(std::vector<uint8_t>(key->begin(), key->end()), want_key);
    const Nonce nonce =
        MakeNonce(GetRank(plain.data()), GetSlot(plain.data()), std::stoull(k.fields.at("use")));

    // Sealing, one-shot and with a long-lived context, gives gen.py's bytes.
    std::vector<uint8_t> sealed(plain);
    sealed.resize(plain.size() + kTagBytes);
    ASSERT_TRUE(SealOnce(*key, mode, sealed.data(), plain.size(), nonce));
    EXPECT_EQ(sealed, k.bytes);
    auto sealer = MessageSealer::Create(*key);
    ASSERT_TRUE(sealer.ok());
    std::vector<uint8_t> again(plain);
    again.resize(plain.size() + kTagBytes);
    ASSERT_TRUE((*sealer)->Seal(mode, again.data(), plain.size(), nonce));
    EXPECT_EQ(again, k.bytes);

    // Opening gives the payload back; a retransmission (retx set) carries the same tag.
    auto opener = MessageOpener::Create(*key);
    ASSERT_TRUE(opener.ok());
    std::vector<uint8_t> out(plain.size() - kHeaderBytes + 16);
    ASSERT_TRUE((*opener)->Open(mode, k.bytes, nonce, out.data()));
    ASSERT_TRUE(OpenOnce(*key, mode, k.bytes, nonce, out.data()));
    if (mode == SecMode::kMacEncrypt) {
      EXPECT_TRUE(std::equal(plain.begin() + kHeaderBytes, plain.end(), out.begin()));
      EXPECT_NE(sealed, plain);
    } else {
      EXPECT_TRUE(std::equal(plain.begin(), plain.end(), k.bytes.begin()));
    }
    std::vector<uint8_t> retx(k.bytes);
    retx[kFlagsOffset] ^= flags::kRetx;
    EXPECT_TRUE((*opener)->Open(mode, retx, nonce, out.data()));

    // Every other change is refused: each bit of the message, the nonce, the key, the mode.
    for (size_t bit = 0; bit < k.bytes.size() * 8; ++bit) {
      if (bit / 8 == kFlagsOffset && (1u << (bit % 8)) == flags::kRetx) continue;
      std::vector<uint8_t> bad(k.bytes);
      bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      EXPECT_FALSE((*opener)->Open(mode, bad, nonce, out.data())) << "bit " << bit;
    }
    EXPECT_FALSE((*opener)->Open(mode, k.bytes,
                                 MakeNonce(GetRank(plain.data()), GetSlot(plain.data()),
                                           std::stoull(k.fields.at("use")) + 1),
                                 out.data()));
    TrafficKey other = *key;
    other[0] ^= 1;
    EXPECT_FALSE(OpenOnce(other, mode, k.bytes, nonce, out.data()));
    const auto flip = mode == SecMode::kMac ? SecMode::kMacEncrypt : SecMode::kMac;
    // Without a payload (a proven JOIN) the two modes seal the same bytes: the header says which.
    if (plain.size() > kHeaderBytes) {
      EXPECT_FALSE(OpenOnce(*key, flip, k.bytes, nonce, out.data()));
    }
  }
  EXPECT_TRUE(saw_mac && saw_encrypt) << "a vector of each keyed mode";
}

// ina's own AES-GCM, each variant this CPU runs (INA_GCM names it for GcmPath::kBest), against
// libcrypto's on random keys, nonces, headers (retx set or not) and modes, with every payload of
// 0 .. 99 words and then random ones up to kMaxK: the same bytes and tag; each opens the other's,
// with the same plaintext; a flipped bit (not retx) fails both. The known answers above run
// through the best variant too (the long-lived sealer and opener there are kBest).
TEST(SecGcm, EveryOwnVariantEqualsLibcryptoOnRandomMessages) {
  const uint64_t seed = ina::tests::Seed(1, "random messages");
  int variants_run = 0;
  for (const char* variant : {"vaes_avx512", "aesni"}) {
    SCOPED_TRACE(variant);
    setenv("INA_GCM", variant, 1);
    auto probe = MessageSealer::Create(TrafficKey{});
    ASSERT_TRUE(probe.ok());
    if (std::string_view((*probe)->path_name()) != variant) {
      std::printf("AES-GCM variant %s: not on this CPU (kBest gives %s)\n", variant,
                  (*probe)->path_name());
      continue;
    }
    ++variants_run;
    std::mt19937_64 rng(seed);
    auto bytes = [&](uint8_t* p, size_t n) {
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
    };
    for (int i = 0; i < 300; ++i) {
      SCOPED_TRACE(i);
      TrafficKey key;
      bytes(key.data(), key.size());
      auto best_seal = MessageSealer::Create(key);
      auto lib_seal = MessageSealer::Create(key, GcmPath::kLibcrypto);
      auto best_open = MessageOpener::Create(key);
      auto lib_open = MessageOpener::Create(key, GcmPath::kLibcrypto);
      ASSERT_TRUE(best_seal.ok() && lib_seal.ok() && best_open.ok() && lib_open.ok());
      EXPECT_STREQ((*best_seal)->path_name(), variant);
      EXPECT_STREQ((*best_open)->path_name(), variant);
      EXPECT_STREQ((*lib_seal)->path_name(), "libcrypto");
      EXPECT_STREQ((*lib_open)->path_name(), "libcrypto");
      const SecMode mode = rng() % 2 ? SecMode::kMac : SecMode::kMacEncrypt;
      const size_t words = i < 100 ? static_cast<size_t>(i) : rng() % (kMaxK + 1);
      const size_t len = kHeaderBytes + words * kElemBytes;
      std::vector<uint8_t> plain(len + kTagBytes);
      bytes(plain.data(), len);
      Nonce nonce;
      bytes(nonce.data(), nonce.size());
      if (i % 7 == 0) std::fill(nonce.begin() + 8, nonce.end(), uint8_t{0xFF});  // use's low bits
      std::vector<uint8_t> a(plain), b(plain);
      ASSERT_TRUE((*best_seal)->Seal(mode, a.data(), len, nonce));
      ASSERT_TRUE((*lib_seal)->Seal(mode, b.data(), len, nonce));
      ASSERT_EQ(a, b) << "mode " << static_cast<int>(mode) << ", " << words << " words";
      std::vector<uint8_t> out1(words * kElemBytes + 1), out2(words * kElemBytes + 1);
      ASSERT_TRUE((*best_open)->Open(mode, a, nonce, out1.data()));
      ASSERT_TRUE((*lib_open)->Open(mode, a, nonce, out2.data()));
      if (mode == SecMode::kMacEncrypt) {
        EXPECT_TRUE(std::equal(plain.begin() + kHeaderBytes, plain.begin() + len, out1.begin()));
        EXPECT_TRUE(std::equal(plain.begin() + kHeaderBytes, plain.begin() + len, out2.begin()));
      }
      std::vector<uint8_t> retx(a);
      retx[kFlagsOffset] ^= flags::kRetx;
      EXPECT_TRUE((*best_open)->Open(mode, retx, nonce, out1.data()));
      size_t bit = rng() % (a.size() * 8);
      if (bit / 8 == kFlagsOffset && (1u << (bit % 8)) == flags::kRetx) ++bit;
      std::vector<uint8_t> bad(a);
      bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      EXPECT_FALSE((*best_open)->Open(mode, bad, nonce, out1.data())) << "bit " << bit;
      EXPECT_FALSE((*lib_open)->Open(mode, bad, nonce, out2.data())) << "bit " << bit;
    }
  }
  // INA_GCM=libcrypto makes kBest libcrypto's.
  setenv("INA_GCM", "libcrypto", 1);
  auto forced = MessageSealer::Create(TrafficKey{});
  unsetenv("INA_GCM");
  ASSERT_TRUE(forced.ok());
  EXPECT_STREQ((*forced)->path_name(), "libcrypto");
#if defined(__x86_64__)
  if (__builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul")) {
    EXPECT_GE(variants_run, 1) << "an x86-64 CPU with AES-NI runs the aesni variant";
  }
#endif
}

TEST(SecKeys, DirectionsJobsGrantsAndSessionsGiveOtherKeys) {
  const std::vector<uint8_t> secret(32, 0x5A);
  const Session zero{};
  Session one{};
  one[15] = 1;
  const TrafficKey base = *DeriveTrafficKey(secret, KeyDirection::kUp, 7, 1, zero);
  EXPECT_NE(*DeriveTrafficKey(secret, KeyDirection::kDown, 7, 1, zero), base);
  EXPECT_NE(*DeriveTrafficKey(secret, KeyDirection::kUp, 8, 1, zero), base);
  EXPECT_NE(*DeriveTrafficKey(secret, KeyDirection::kUp, 7, 2, zero), base);
  EXPECT_NE(*DeriveTrafficKey(secret, KeyDirection::kUp, 7, 1, one), base);
  EXPECT_EQ(*DeriveTrafficKey(secret, KeyDirection::kUp, 7, 1, zero), base);
}

TEST(SecKeys, SecretsOutsideTheirLengthsAreRefused) {
  const std::vector<uint8_t> short_secret(kSecretMinBytes - 1, 1);
  const std::vector<uint8_t> long_secret(kSecretMaxBytes + 1, 1);
  auto a = DeriveTrafficKey(short_secret, KeyDirection::kUp, 1, 1, Session{});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("job secret of 15 bytes"), std::string::npos);
  EXPECT_FALSE(DeriveTrafficKey(long_secret, KeyDirection::kUp, 1, 1, Session{}).ok());
}

// A proven JOIN (the answer to a join_challenge) is gen.py's join_proven vector, and nothing else
// opens as one: another nonce, salt, secret, header field or sec.
TEST(SecJoin, ProofMatchesGenPyAndRefusesEverythingElse) {
  const auto kats = LoadSecKats();
  const auto it = std::find_if(kats.begin(), kats.end(),
                               [](const SecKat& k) { return k.fields.at("dir") == kKdfJoin; });
  ASSERT_NE(it, kats.end()) << "no sec_kat of a proven JOIN";
  const auto secret = FromHex(it->fields.at("secret"));
  const auto session = SessionOf(it->fields.at("session"));
  ASSERT_EQ(session.size(), kJoinChallengeBytes) << "a proven JOIN's session is nonce | salt";
  const JoinChallenge nonce = JoinChallenge::From(session.data());
  std::array<uint8_t, kJoinChallengeBytes> encoded;
  nonce.EncodeTo(encoded.data());
  EXPECT_TRUE(std::equal(encoded.begin(), encoded.end(), session.begin()));
  std::vector<uint8_t> msg = PlainMessage(it->fields.at("kat"), 1);
  ASSERT_EQ(msg.size(), kHeaderBytes);
  msg.resize(kHeaderBytes + kTagBytes);
  ASSERT_TRUE(SealJoinProof(secret, nonce, msg.data()).ok());
  EXPECT_EQ(msg, it->bytes);
  EXPECT_TRUE(JoinProofOk(secret, nonce, msg));
  std::vector<uint8_t> resent(msg);
  resent[kFlagsOffset] |= flags::kRetx;
  EXPECT_TRUE(JoinProofOk(secret, nonce, resent)) << "a resend is the same proof";

  JoinChallenge other_nonce = nonce;
  other_nonce.nonce[3] ^= 0x40;
  EXPECT_FALSE(JoinProofOk(secret, other_nonce, msg)) << "an old challenge's proof (a replay)";
  JoinChallenge other_salt = nonce;
  other_salt.salt[15] ^= 0x01;
  EXPECT_FALSE(JoinProofOk(secret, other_salt, msg))
      << "a proof made with another salt (a forged challenge's, or an earlier key's)";
  std::vector<uint8_t> other_secret(secret);
  other_secret[0] ^= 1;
  EXPECT_FALSE(JoinProofOk(other_secret, nonce, msg));
  for (size_t byte = 0; byte < msg.size(); ++byte) {
    if (byte == kFlagsOffset) continue;
    std::vector<uint8_t> bad(msg);
    bad[byte] ^= 0x10;
    EXPECT_FALSE(JoinProofOk(secret, nonce, bad)) << "byte " << byte;
  }
  std::vector<uint8_t> longer(msg);
  longer.push_back(0);
  EXPECT_FALSE(JoinProofOk(secret, nonce, longer));

  std::vector<uint8_t> crc_join = PlainMessage(it->fields.at("kat"), 0);
  crc_join.resize(kHeaderBytes + kTagBytes);
  EXPECT_EQ(SealJoinProof(secret, nonce, crc_join.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SealJoinProof(std::vector<uint8_t>(8, 1), nonce, msg.data()).code(),
            StatusCode::kInvalidArgument);
}

TEST(SecJoin, NoncesFollowTheFabricSecretAndTheContext) {
  const std::vector<uint8_t> fabric(32, 3);
  const std::vector<uint8_t> ctx = {1, 2, 3, 4};
  const JoinNonce n = MakeJoinNonce(fabric, ctx);
  EXPECT_EQ(MakeJoinNonce(fabric, ctx), n);
  EXPECT_NE(n, JoinNonce{});
  EXPECT_NE(MakeJoinNonce(fabric, std::vector<uint8_t>{1, 2, 3, 5}), n);
  EXPECT_NE(MakeJoinNonce(std::vector<uint8_t>(32, 4), ctx), n);
  std::array<uint8_t, 32> a{}, b{};
  ASSERT_TRUE(RandomBytes(a).ok());
  ASSERT_TRUE(RandomBytes(b).ok());
  EXPECT_NE(a, b);
}

TEST(SecNonce, RankSlotUseBigEndian) {
  const Nonce n = MakeNonce(0x0102, 0x0304, 0x05060708090A0B0Cull);
  const Nonce want = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  EXPECT_EQ(n, want);
}

// A secret's file (docs/security.md): owner-only, hex, 16 .. 64 bytes; never echoed.
TEST(SecretFile, OwnerOnlyHexOfTheRightLength) {
  char dir[] = "/tmp/ina_secret_file_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/admin.key";
  auto write = [&](const std::string& text, mode_t mode) {
    std::ofstream(path) << text;
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  };
  const std::string hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
  write(hex + "\n", 0600);
  auto ok = LoadSecretFile(path, "--admin-key-file");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 32u);
  EXPECT_EQ((*ok)[1], 0x11);
  EXPECT_EQ((*ok)[31], 0xFF);
  write(hex, 0640);
  auto loose = LoadSecretFile(path, "--admin-key-file");
  EXPECT_EQ(loose.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(loose.status().message().find("chmod 600"), std::string::npos);
  for (const std::string& bad :
       {std::string("00112233"), hex + "0", std::string(130, 'a'), "zz" + hex.substr(2)}) {
    write(bad, 0400);
    auto r = LoadSecretFile(path, "--admin-key-file");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message().find(bad), std::string::npos) << "the file's text is echoed";
  }
  EXPECT_FALSE(LoadSecretFile(std::string(dir) + "/missing", "--admin-key-file").ok());
  std::remove(path.c_str());
  rmdir(dir);
}

TEST(SecSetKey, SealedUnderTheAdminKeyWithItsSequence) {
  const std::vector<uint8_t> admin(32, 7), secret(20, 9);
  auto m = SealSetKey(admin, 12, SecMode::kMac, secret, 0x123456789ABull);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Header h = DecodeHeader(m->data());
  EXPECT_EQ(h.type, MsgType::kSetKey);
  EXPECT_EQ(h.job, 12);
  EXPECT_EQ(h.aux, static_cast<uint16_t>(SecMode::kMac));
  EXPECT_EQ((uint64_t{h.gen} << 32) | h.offset, 0x123456789ABull);
  const TrafficKey key = *DeriveTrafficKey(admin, KeyDirection::kUp, 0, 0, Session{});
  std::vector<uint8_t> plain(secret.size() + 16);
  ASSERT_TRUE(
      OpenOnce(key, SecMode::kMacEncrypt, *m, MakeNonce(0, 0, 0x123456789ABull), plain.data()));
  EXPECT_TRUE(std::equal(secret.begin(), secret.end(), plain.begin()));
  EXPECT_FALSE(std::equal(secret.begin(), secret.end(), m->begin() + kHeaderBytes));  // encrypted
  EXPECT_FALSE(SealSetKey(admin, 12, SecMode::kMac, std::vector<uint8_t>(18, 1), 1).ok());
  EXPECT_FALSE(SealSetKey(admin, 12, SecMode::kMac, secret, uint64_t{1} << 48).ok());
  EXPECT_FALSE(SealSetKey(std::vector<uint8_t>(8, 1), 12, SecMode::kMac, secret, 1).ok());
}

TEST(SetKeySequence, MillisecondsTimesAttemptsPerMsPlusTheAttempt) {
  const std::chrono::system_clock::time_point t{std::chrono::milliseconds(1'764'950'400'123)};
  EXPECT_EQ(SetKeySequence(t), 1'764'950'400'123ull * 64);
  EXPECT_EQ(SetKeySequence(t, 5), 1'764'950'400'123ull * 64 + 5);
  EXPECT_LT(SetKeySequence(t, 63), SetKeySequence(t + std::chrono::milliseconds(1)));
  // Below 2^48, the sequence's width on the wire, until the year 2109.
  const std::chrono::system_clock::time_point y2100{std::chrono::seconds(4'102'444'800)};
  EXPECT_LT(SetKeySequence(y2100, 63), uint64_t{1} << 48);
}

}  // namespace
}  // namespace ina::proto
