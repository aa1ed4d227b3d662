// The AES-GCM blocks of keyed jobs alone (docs/rtl/ina_aes128.md, docs/rtl/ina_gcm_hash.md),
// through the Vina_gcm_tb model (rtl/tb/ina_gcm_tb.sv), against OpenSSL's libcrypto: AES-128 (EVP,
// ECB) and ina::proto's SealOnce (libcrypto's AES-128-GCM, the reference engine's), under random
// idle cycles, with random keys per block or per frame:
// - ina_aes128 encrypts as libcrypto does (FIPS-197's example too), one block per cycle, each
//   under its own key, 11 cycles; ina_aes128 with Inverse undoes it from the last round key it
//   gives;
// - ina_gcm_key's H .. H^4 and last round key;
// - ina_gcm_hash (Check = 0) gives the S of a frame that SealOnce's tag masks (tag ^ AES_K(J0)),
//   in mode mac and in mode mac_encrypt (payload ciphertext), frame by frame;
// - ina_gcm_check gives J0 of the frame's nonce for every genuine frame (retx set after sealing
//   too), and something else for a frame with any bit of its header, payload or tag flipped, in
//   either mode, and the key it was given;
// - ina_gcm_ctr XORs each beat with the CTR keystream of its blocks (libcrypto's AES of the
//   counters), passes the others unchanged, 11 cycles later, with their user bits.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "Vina_gcm_tb.h"
#include "ina/proto/sec.h"
#include "ina/proto/wire.h"
#include "model_tb.h"

namespace ina::rtl_units {
namespace {

namespace p = proto;
using Tb = ModelTb<Vina_gcm_tb>;
using Block = std::array<uint8_t, 16>;

constexpr int kAesLatency = 11;
constexpr int kKeyLatency = 14;
constexpr int kHashLatency = 3;
constexpr int kCheckLatency = 14;

// A block in a wide signal at bit lsb, byte 0 in the top 8 bits (the RTL's order).
template <typename W>
void SetBlock(W& w, unsigned lsb, const Block& b) {
  for (unsigned i = 0; i < 16; ++i) SetBits(w, lsb + 120 - 8 * i, 8, b[i]);
}
template <typename W>
Block GetBlock(const W& w, unsigned lsb) {
  Block b;
  for (unsigned i = 0; i < 16; ++i) b[i] = static_cast<uint8_t>(GetBits(w, lsb + 120 - 8 * i, 8));
  return b;
}

Block RandomBlock(std::mt19937_64& rng) {
  Block b;
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// libcrypto's AES-128 of one block.
Block Encrypt(const Block& key, const Block& in) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  Block out{};
  int n = 0;
  EXPECT_EQ(EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, key.data(), nullptr), 1);
  EVP_CIPHER_CTX_set_padding(ctx, 0);
  EXPECT_EQ(EVP_EncryptUpdate(ctx, out.data(), &n, in.data(), 16), 1);
  EXPECT_EQ(n, 16);
  EVP_CIPHER_CTX_free(ctx);
  return out;
}

// X * Y in GCM's field (SP 800-38D, algorithm 1), the test's own.
Block GfMul(const Block& x, const Block& y) {
  Block z{}, v = y;
  for (int i = 0; i < 128; ++i) {
    if ((x[i / 8] >> (7 - i % 8)) & 1) {
      for (int k = 0; k < 16; ++k) z[k] ^= v[k];
    }
    const bool lsb = v[15] & 1;
    for (int k = 15; k > 0; --k) v[k] = static_cast<uint8_t>((v[k] >> 1) | (v[k - 1] << 7));
    v[0] >>= 1;
    if (lsb) v[0] ^= 0xE1;
  }
  return z;
}

Block Xor(const Block& a, const Block& b) {
  Block r;
  for (int i = 0; i < 16; ++i) r[i] = a[i] ^ b[i];
  return r;
}

Block J0(const p::Nonce& n) {
  Block j{};
  std::memcpy(j.data(), n.data(), 12);
  j[15] = 1;
  return j;
}

TEST(RtlGcmTest, Aes128MatchesFips197AndLibcrypto) {
  std::mt19937_64 rng(Seed());
  Tb tb;
  struct In {
    Block key, pt;
    uint8_t user;
  };
  std::vector<In> in;
  // FIPS-197, appendix C.1.
  In fips{};
  for (int i = 0; i < 16; ++i) {
    fips.key[i] = static_cast<uint8_t>(i);
    fips.pt[i] = static_cast<uint8_t>(0x11 * i);
  }
  in.push_back(fips);
  for (int i = 0; i < 300; ++i) {
    in.push_back({RandomBlock(rng), RandomBlock(rng), static_cast<uint8_t>(rng())});
  }
  std::deque<std::pair<size_t, uint64_t>> sent;  // block, cycle
  std::vector<std::pair<Block, Block>> ct_key;   // for the inverse
  size_t next = 0, got = 0;
  for (uint64_t cyc = 0; got < in.size() && cyc < 10000; ++cyc) {
    const bool send = next < in.size() && rng() % 4 != 0;
    tb->aes_in_valid_i = send;
    if (send) {
      SetBlock(tb->aes_in_block_i, 0, in[next].pt);
      SetBlock(tb->aes_in_key_i, 0, in[next].key);
      tb->aes_in_user_i = in[next].user;
    }
    tb.Settle();
    if (tb->aes_out_valid_o) {
      ASSERT_FALSE(sent.empty()) << "a block out that never went in, cycle " << cyc;
      const auto [i, at] = sent.front();
      sent.pop_front();
      EXPECT_EQ(cyc - at, static_cast<uint64_t>(kAesLatency)) << "block " << i;
      const Block ct = GetBlock(tb->aes_out_block_o, 0);
      EXPECT_EQ(ct, Encrypt(in[i].key, in[i].pt)) << "block " << i;
      EXPECT_EQ(tb->aes_out_user_o, in[i].user) << "block " << i;
      if (i == 0) {
        const Block want = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
                            0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};
        EXPECT_EQ(ct, want) << "FIPS-197 C.1";
      }
      ct_key.push_back({ct, GetBlock(tb->aes_out_key_o, 0)});
      ++got;
    }
    if (send) sent.push_back({next++, cyc});
    tb.Edge();
  }
  ASSERT_EQ(got, in.size());

  // ina_aes128 with Inverse from the last round key: the plaintext again.
  sent.clear();
  next = got = 0;
  for (uint64_t cyc = 0; got < in.size() && cyc < 10000; ++cyc) {
    const bool send = next < in.size() && rng() % 4 != 0;
    tb->inv_in_valid_i = send;
    if (send) {
      SetBlock(tb->inv_in_block_i, 0, ct_key[next].first);
      SetBlock(tb->inv_in_last_key_i, 0, ct_key[next].second);
      tb->inv_in_user_i = in[next].user;
    }
    tb.Settle();
    if (tb->inv_out_valid_o) {
      ASSERT_FALSE(sent.empty());
      const auto [i, at] = sent.front();
      sent.pop_front();
      EXPECT_EQ(cyc - at, static_cast<uint64_t>(kAesLatency)) << "block " << i;
      EXPECT_EQ(GetBlock(tb->inv_out_block_o, 0), in[i].pt) << "block " << i;
      EXPECT_EQ(tb->inv_out_user_o, in[i].user) << "block " << i;
      ++got;
    }
    if (send) sent.push_back({next++, cyc});
    tb.Edge();
  }
  EXPECT_EQ(got, in.size());
}

// ina_gcm_pkg's S-boxes: the table form (what the models simulate, checked against libcrypto by
// the AES tests) and the ROM form (what synthesis gets, `ifdef SYNTHESIS) give the same bytes.
TEST(RtlGcmTest, SboxRomIsTheTable) {
  Tb tb;
  std::array<uint8_t, 256> s{}, inv{};
  for (unsigned x = 0; x < 256; ++x) {
    tb->sbx_x_i = static_cast<uint8_t>(x);
    tb.Settle();
    EXPECT_EQ(tb->sbx_rom_o, tb->sbx_table_o) << "S(" << x << ")";
    EXPECT_EQ(tb->sbx_inv_rom_o, tb->sbx_inv_table_o) << "S^-1(" << x << ")";
    s[x] = tb->sbx_table_o;
    inv[x] = tb->sbx_inv_table_o;
  }
  for (unsigned x = 0; x < 256; ++x) EXPECT_EQ(inv[s[x]], x) << "S^-1(S(" << x << "))";
  EXPECT_EQ(s[0x00], 0x63);  // FIPS-197, figure 7
  EXPECT_EQ(s[0x53], 0xed);
}

// Runs ina_gcm_key for `key`; returns H .. H^4 and the last round key as the module gave them.
struct KeyOut {
  std::array<Block, 4> hpow;
  Block last_key;
};
KeyOut RunKey(Tb& tb, const Block& key) {
  KeyOut out{};
  tb->key_start_i = 1;
  SetBlock(tb->key_key_i, 0, key);
  tb.Settle();
  tb.Edge();
  tb->key_start_i = 0;
  for (int c = 1; c <= kKeyLatency + 2; ++c) {
    tb.Settle();
    if (tb->key_done_o) {
      EXPECT_EQ(c, kKeyLatency);
      EXPECT_TRUE(tb->key_busy_o);
      for (unsigned i = 0; i < 4; ++i) out.hpow[i] = GetBlock(tb->key_hpow_o, 128 * i);
      out.last_key = GetBlock(tb->key_last_key_o, 0);
    }
    tb.Edge();
  }
  tb.Settle();
  EXPECT_FALSE(tb->key_busy_o);
  return out;
}

TEST(RtlGcmTest, KeyGivesThePowersOfH) {
  std::mt19937_64 rng(Seed());
  Tb tb;
  for (int k = 0; k < 20; ++k) {
    const Block key = RandomBlock(rng);
    const KeyOut out = RunKey(tb, key);
    const Block h = Encrypt(key, Block{});
    Block want = h;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(out.hpow[i], want) << "H^" << i + 1 << ", key " << k;
      want = GfMul(want, h);
    }
    // The last round key: ina_aes128 gives it too (its own test checks that it decrypts).
    tb->aes_in_valid_i = 1;
    SetBlock(tb->aes_in_key_i, 0, key);
    tb.Settle();
    tb.Edge();
    tb->aes_in_valid_i = 0;
    for (int c = 1; c < kAesLatency; ++c) {
      tb.Settle();
      tb.Edge();
    }
    tb.Settle();
    ASSERT_TRUE(tb->aes_out_valid_o);
    EXPECT_EQ(out.last_key, GetBlock(tb->aes_out_key_o, 0)) << "key " << k;
    tb.Edge();
  }
}

// A keyed data frame as a fabric receives it: 42 bytes of L2-L4 (junk here), the ina header with
// sec mac or mac_encrypt, count elements (ciphertext in mac_encrypt), the tag; sealed by libcrypto
// under `key` with nonce (rank, slot, use).
struct Frame {
  std::vector<uint8_t> bytes;
  p::Nonce nonce;
  int key = 0;          // which of the test's keys
  bool enc = false;     // mode mac_encrypt
  bool genuine = true;  // unchanged since sealing (but for the retx bit)
};

Frame SealedFrame(std::mt19937_64& rng, const std::vector<p::TrafficKey>& keys, size_t max_count) {
  Frame f;
  f.enc = rng() % 2 == 0;
  const p::SecMode mode = f.enc ? p::SecMode::kMacEncrypt : p::SecMode::kMac;
  f.key = static_cast<int>(rng() % keys.size());
  size_t count = rng() % 3 == 0 ? max_count - rng() % 3 : rng() % (max_count + 1);
  p::Header h;
  h.version = p::kVersion;
  h.type = p::MsgType::kData;
  h.flags = static_cast<uint8_t>(rng()) & static_cast<uint8_t>(~p::flags::kRetx);
  h.exp = static_cast<uint8_t>(rng());
  h.next_exp = static_cast<uint8_t>(rng());
  h.sec = static_cast<uint8_t>(mode);
  h.job = static_cast<uint16_t>(rng());
  h.rank = static_cast<uint16_t>(rng());
  h.slot = static_cast<uint16_t>(rng());
  h.gen = static_cast<uint16_t>(rng());
  h.count = static_cast<uint16_t>(count);
  h.offset = static_cast<uint32_t>(rng());
  std::vector<uint8_t> msg(p::kHeaderBytes + 4 * count + p::kTagBytes);
  p::EncodeHeader(h, msg.data());
  for (size_t i = p::kHeaderBytes; i < msg.size(); ++i) msg[i] = static_cast<uint8_t>(rng());
  const uint64_t use = rng() % 2 ? static_cast<uint64_t>(rng() % 70000) : rng();
  f.nonce = p::MakeNonce(h.rank, h.slot, use);
  EXPECT_TRUE(p::SealOnce(keys[f.key], mode, msg.data(), msg.size() - p::kTagBytes, f.nonce));
  f.bytes.resize(p::kFramePrefixBytes);
  for (auto& b : f.bytes) b = static_cast<uint8_t>(rng());
  f.bytes.insert(f.bytes.end(), msg.begin(), msg.end());
  return f;
}

// Beats of a frame (64 bytes each; the last one's unused bytes junk: nothing may read them).
std::vector<std::array<uint8_t, 64>> Beats(const std::vector<uint8_t>& bytes,
                                           std::mt19937_64& rng) {
  std::vector<std::array<uint8_t, 64>> beats((bytes.size() + 63) / 64);
  for (size_t b = 0; b < beats.size(); ++b) {
    for (size_t i = 0; i < 64; ++i) {
      const size_t at = 64 * b + i;
      beats[b][i] = at < bytes.size() ? bytes[at] : static_cast<uint8_t>(rng());
    }
  }
  return beats;
}

struct Keys {
  std::vector<p::TrafficKey> keys;
  std::vector<KeyOut> out;
};
Keys MakeKeys(Tb& tb, std::mt19937_64& rng, int n) {
  Keys k;
  for (int i = 0; i < n; ++i) {
    p::TrafficKey key;
    for (auto& b : key) b = static_cast<uint8_t>(rng());
    Block kb;
    std::memcpy(kb.data(), key.data(), 16);
    k.keys.push_back(key);
    k.out.push_back(RunKey(tb, kb));
  }
  return k;
}

// Streams frames into one of the two frame inputs (hash or check) under random idle cycles, one
// result expected per frame, in order, `latency` cycles after its last beat, with the frame's user
// bits (its index mod 256); each frame with its key and mode (enc_of: mac_encrypt); `verify` gets
// each result with its frame's index.
template <typename SetIn, typename Out, typename Verify>
void RunFrames(Tb& tb, std::mt19937_64& rng, const std::vector<std::vector<uint8_t>>& frames,
               const std::vector<int>& key_of, const std::vector<bool>& enc_of, const Keys& keys,
               int latency, SetIn set_in, Out out, Verify verify) {
  std::deque<std::pair<size_t, uint64_t>> pending;  // frame, cycle of its last beat
  size_t fi = 0, beat = 0, got = 0;
  std::vector<std::array<uint8_t, 64>> beats;
  if (!frames.empty()) beats = Beats(frames[0], rng);
  for (uint64_t cyc = 0; got < frames.size() && cyc < 1000000; ++cyc) {
    const bool send = fi < frames.size() && rng() % 5 != 0;
    bool last = false;
    if (send) {
      last = beat + 1 == beats.size();
      set_in(true, beats[beat].data(), last, keys.out[key_of[fi]], static_cast<uint8_t>(fi % 256),
             enc_of[fi]);
    } else {
      // Idle: a mode that is not the next frame's (read only with a beat).
      set_in(false, beats.empty() ? nullptr : beats[0].data(), false, keys.out[0], 0,
             fi < frames.size() && !enc_of[fi]);
    }
    tb.Settle();
    uint8_t user = 0;
    Block result{};
    if (out(&result, &user)) {
      ASSERT_FALSE(pending.empty()) << "a result for no frame, cycle " << cyc;
      const auto [i, at] = pending.front();
      pending.pop_front();
      EXPECT_EQ(cyc - at, static_cast<uint64_t>(latency)) << "frame " << i;
      EXPECT_EQ(user, static_cast<uint8_t>(i % 256)) << "frame " << i;
      verify(i, result);
      ++got;
    }
    if (send) {
      if (last) {
        pending.push_back({fi, cyc});
        ++fi;
        beat = 0;
        if (fi < frames.size()) beats = Beats(frames[fi], rng);
      } else {
        ++beat;
      }
    }
    tb.Edge();
  }
  EXPECT_EQ(got, frames.size());
}

TEST(RtlGcmTest, HashIsWhatTheTagMasks) {
  std::mt19937_64 rng(Seed());
  Tb tb;
  const Keys keys = MakeKeys(tb, rng, 3);
  std::vector<Frame> sealed;
  std::vector<std::vector<uint8_t>> frames;  // without the tag: what a sealer hashes
  std::vector<int> key_of;
  std::vector<bool> enc_of;
  for (int i = 0; i < 600; ++i) {
    sealed.push_back(SealedFrame(rng, keys.keys, 300));
    std::vector<uint8_t> f = sealed.back().bytes;
    f.resize(f.size() - p::kTagBytes);
    if (rng() % 4 == 0)
      f[p::kFramePrefixBytes + p::kFlagsOffset] |= p::flags::kRetx;  // not covered
    frames.push_back(f);
    key_of.push_back(sealed.back().key);
    enc_of.push_back(sealed.back().enc);
  }
  size_t n = 0, enc = 0;
  RunFrames(
      tb, rng, frames, key_of, enc_of, keys, kHashLatency,
      [&](bool valid, const uint8_t* beat, bool last, const KeyOut& k, uint8_t user, bool e) {
        tb->hash_in_valid_i = valid;
        tb->hash_in_enc_i = e;
        if (beat != nullptr) SetBeat(tb->hash_in_data_i, beat);
        tb->hash_in_last_i = last;
        for (unsigned i = 0; i < 4; ++i) SetBlock(tb->hash_in_hpow_i, 128 * i, k.hpow[i]);
        tb->hash_in_user_i = user;
      },
      [&](Block* result, uint8_t* user) {
        if (!tb->hash_out_valid_o) return false;
        *result = GetBlock(tb->hash_out_hash_o, 0);
        *user = tb->hash_out_user_o;
        return true;
      },
      [&](size_t i, const Block& result) {
        const Frame& f = sealed[i];
        Block tag;
        std::memcpy(tag.data(), f.bytes.data() + f.bytes.size() - 16, 16);
        Block key;
        std::memcpy(key.data(), keys.keys[f.key].data(), 16);
        EXPECT_EQ(result, Xor(tag, Encrypt(key, J0(f.nonce))))
            << (f.enc ? "mac_encrypt" : "mac") << " frame " << i << " of " << f.bytes.size()
            << " bytes";
        ++n;
        enc += f.enc;
      });
  EXPECT_EQ(n, frames.size());
  EXPECT_GT(enc, 200u);
  EXPECT_LT(enc, 400u);
}

TEST(RtlGcmTest, CheckGivesJ0OfGenuineFramesOnly) {
  std::mt19937_64 rng(Seed());
  Tb tb;
  const Keys keys = MakeKeys(tb, rng, 3);
  std::vector<Frame> sealed;
  std::vector<std::vector<uint8_t>> frames;
  std::vector<int> key_of;
  std::vector<bool> enc_of;
  int forged = 0, retx = 0;
  for (int i = 0; i < 800; ++i) {
    Frame f = SealedFrame(rng, keys.keys, 300);
    switch (rng() % 4) {
      case 0: {  // one bit of the header, the payload or the tag flipped (not the retx bit)
        size_t at;
        uint8_t bit;
        do {
          at = p::kFramePrefixBytes + rng() % (f.bytes.size() - p::kFramePrefixBytes);
          bit = static_cast<uint8_t>(1u << (rng() % 8));
        } while (at == p::kFramePrefixBytes + p::kFlagsOffset && bit == p::flags::kRetx);
        f.bytes[at] ^= bit;
        f.genuine = false;
        ++forged;
        break;
      }
      case 1:  // a retransmission: same tag
        f.bytes[p::kFramePrefixBytes + p::kFlagsOffset] |= p::flags::kRetx;
        ++retx;
        break;
      case 2:  // sealed under another job's key
        f.key = (f.key + 1) % static_cast<int>(keys.keys.size());
        f.genuine = false;
        ++forged;
        break;
      default:
        break;
    }
    frames.push_back(f.bytes);
    key_of.push_back(f.key);
    enc_of.push_back(f.enc);
    sealed.push_back(std::move(f));
  }
  int ok = 0, bad = 0, enc_ok = 0;
  Block key_out{};
  RunFrames(
      tb, rng, frames, key_of, enc_of, keys, kCheckLatency,
      [&](bool valid, const uint8_t* beat, bool last, const KeyOut& k, uint8_t user, bool e) {
        tb->chk_in_valid_i = valid;
        tb->chk_in_enc_i = e;
        if (beat != nullptr) SetBeat(tb->chk_in_data_i, beat);
        tb->chk_in_last_i = last;
        for (unsigned i = 0; i < 4; ++i) SetBlock(tb->chk_in_hpow_i, 128 * i, k.hpow[i]);
        SetBlock(tb->chk_in_last_key_i, 0, k.last_key);
        tb->chk_in_user_i = user;
      },
      [&](Block* result, uint8_t* user) {
        if (!tb->chk_out_valid_o) return false;
        EXPECT_TRUE(tb->chk_busy_o);
        *result = GetBlock(tb->chk_out_j0_o, 0);
        key_out = GetBlock(tb->chk_out_key_o, 0);
        *user = tb->chk_out_user_o;
        return true;
      },
      [&](size_t i, const Block& result) {
        const Frame& f = sealed[i];
        Block key;
        std::memcpy(key.data(), keys.keys[f.key].data(), 16);
        EXPECT_EQ(key_out, key) << "frame " << i << ": the key it was checked under";
        if (f.genuine) {
          EXPECT_EQ(result, J0(f.nonce))
              << (f.enc ? "mac_encrypt" : "mac") << " genuine frame " << i;
          ++ok;
          enc_ok += f.enc;
        } else {
          EXPECT_NE(result, J0(f.nonce)) << "forged frame " << i;
          ++bad;
        }
      });
  tb.Settle();
  EXPECT_FALSE(tb->chk_busy_o);
  std::printf("genuine %d (mac_encrypt %d, retx %d), forged %d\n", ok, enc_ok, retx, bad);
  EXPECT_EQ(bad, forged);
  EXPECT_GT(enc_ok, 100);
  EXPECT_LT(enc_ok, ok - 100);
  EXPECT_GT(forged, 200);
  EXPECT_GT(retx, 100);
}

// ina_gcm_ctr: beats under random idle cycles, each encrypted or not, of random index, J0 and key
// (a key per beat: consecutive beats may be different jobs'); each comes out 11 cycles later with
// its user bits, XORed with AES_K(J0 + 4 index + j + 1) over its block j when encrypted (J0's last
// 32 bits counting mod 2^32: some J0 near the wrap), unchanged otherwise.
TEST(RtlGcmTest, CtrXorsEachBeatWithItsKeystream) {
  constexpr int kCtrLatency = 11;
  std::mt19937_64 rng(Seed());
  Tb tb;
  struct In {
    std::array<uint8_t, 64> data;
    bool enc;
    uint16_t index;
    Block j0, key;
    uint8_t user;
    uint64_t at;
  };
  std::deque<In> pending;
  int sent = 0, got = 0, enc = 0, wraps = 0;
  for (uint64_t cyc = 0; got < 3000 && cyc < 100000; ++cyc) {
    const bool send = sent < 3000 && rng() % 4 != 0;
    In in{};
    for (auto& b : in.data) b = static_cast<uint8_t>(rng());
    in.enc = rng() % 3 != 0;
    in.index = static_cast<uint16_t>(rng() % 4 == 0 ? rng() : rng() % 512);
    in.j0 = RandomBlock(rng);
    if (rng() % 8 == 0) std::memset(in.j0.data() + 12, 0xFF, 3);  // near 2^32: counters wrap
    in.key = RandomBlock(rng);
    in.user = static_cast<uint8_t>(sent);
    in.at = cyc;
    tb->ctr_in_valid_i = send;
    SetBeat(tb->ctr_in_data_i, in.data.data());
    tb->ctr_in_enc_i = in.enc;
    tb->ctr_in_index_i = in.index;
    SetBlock(tb->ctr_in_j0_i, 0, in.j0);
    SetBlock(tb->ctr_in_key_i, 0, in.key);
    tb->ctr_in_user_i = in.user;
    tb.Settle();
    EXPECT_EQ(tb->ctr_inflight_o, pending.size()) << "cycle " << cyc;
    if (tb->ctr_out_valid_o) {
      ASSERT_FALSE(pending.empty()) << "a beat out for no beat in, cycle " << cyc;
      const In want = pending.front();
      pending.pop_front();
      EXPECT_EQ(cyc - want.at, static_cast<uint64_t>(kCtrLatency));
      EXPECT_EQ(tb->ctr_out_user_o, want.user);
      std::array<uint8_t, 64> out;
      GetBeat(tb->ctr_out_data_o, out.data());
      std::array<uint8_t, 64> expect = want.data;
      if (want.enc) {
        for (unsigned j = 0; j < 4; ++j) {
          Block ctr = want.j0;
          const uint32_t low = p::Load32(ctr.data() + 12) + 4u * want.index + j + 1u;
          wraps += low < p::Load32(want.j0.data() + 12);
          p::Store32(ctr.data() + 12, low);
          const Block ks = Encrypt(want.key, ctr);
          for (unsigned t = 0; t < 16; ++t) expect[16 * j + t] ^= ks[t];
        }
        ++enc;
      }
      EXPECT_EQ(out, expect) << "beat " << got << (want.enc ? " (encrypted)" : "");
      ++got;
    } else {
      EXPECT_EQ(tb->ctr_busy_o, !pending.empty());
    }
    if (send) {
      pending.push_back(in);
      ++sent;
    }
    tb.Edge();
  }
  EXPECT_EQ(got, 3000);
  std::printf("beats %d, encrypted %d, counters that wrapped %d\n", got, enc, wraps);
  EXPECT_GT(enc, 1500);
  EXPECT_GT(wraps, 20);
}

}  // namespace
}  // namespace ina::rtl_units
