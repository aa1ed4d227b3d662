// Authenticated jobs end to end (docs/security.md) on the real ina-switchd: an admin key file,
// --require-job-keys, a SET_KEY from an operator socket, then a keyed job of two fake workers whose
// data carry AES-GCM tags; keyless and guessed JOINs, CRC-only packets naming the keyed job,
// forged tags, a member's data sealed by another member, and a replayed SET_KEY are refused and
// counted.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "ina/proto/sec.h"
#include "support/switchd_process.h"

namespace ina::test {
namespace {

std::vector<uint8_t> Secret(uint8_t seed) {
  std::vector<uint8_t> s(32);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed * 37 + i);
  return s;
}

std::string Hex(const std::vector<uint8_t>& b) {
  std::string s;
  char buf[3];
  for (uint8_t x : b) {
    std::snprintf(buf, sizeof buf, "%02x", x);
    s += buf;
  }
  return s;
}

// A temporary directory with the admin key file (mode `mode`), removed at the end.
class KeyDir {
 public:
  KeyDir(const std::vector<uint8_t>& admin, mode_t mode) {
    char dir[] = "/tmp/ina_keys_e2e_XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      ADD_FAILURE() << "mkdtemp";
      return;
    }
    dir_ = dir;
    path_ = dir_ + "/admin.key";
    std::ofstream(path_) << Hex(admin) << "\n";
    EXPECT_EQ(chmod(path_.c_str(), mode), 0);
  }
  ~KeyDir() {
    std::remove(path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

Bytes SetKey(const std::vector<uint8_t>& admin, uint16_t job, const std::vector<uint8_t>& secret,
             uint64_t seq) {
  return p::SealSetKey(admin, job, p::SecMode::kMac, secret, seq).value();
}

// Data as a keyed worker sends it in the job's first grant (use = gen), under the session salt
// its join_challenge carried.
Bytes KeyedData(const std::vector<uint8_t>& secret, const p::Session& salt, uint16_t job,
                uint16_t rank, uint16_t slot, uint16_t gen, const std::vector<int32_t>& elems) {
  Bytes b = Data(job, rank, slot, gen, elems, p::flags::kInt32);
  const size_t len = b.size() - p::kCrcBytes;
  b.resize(len + p::kTagBytes);
  p::SetSec(b.data(), static_cast<uint8_t>(p::SecMode::kMac));
  const auto up = p::DeriveTrafficKey(secret, p::KeyDirection::kUp, job, 1, salt).value();
  EXPECT_TRUE(p::SealOnce(up, p::SecMode::kMac, b.data(), len, p::MakeNonce(rank, slot, gen)));
  return b;
}

// A keyed job's JOIN as a worker holding `secret` makes it (docs/security.md, "JOIN proves
// knowledge of the key"): the plain JOIN, the switch's join_challenge, the proven JOIN (returned;
// the challenge's session salt into *salt if given).
Bytes ProveJoin(Worker& w, const Bytes& join, const std::vector<uint8_t>& secret,
                p::Session* salt = nullptr) {
  w.Send(join);
  auto c = w.Recv();
  if (!c.has_value()) {
    ADD_FAILURE() << "no join_challenge";
    return {};
  }
  EXPECT_EQ(p::GetType(c->data()), p::MsgType::kJoinChallenge);
  EXPECT_EQ(c->size(), p::MessageBytes(p::kJoinChallengeBytes / p::kElemBytes));
  EXPECT_TRUE(p::MessageCrcOk(*c));
  const auto nonce = p::JoinChallenge::From(c->data() + p::kHeaderBytes);
  if (salt != nullptr) *salt = nonce.salt;
  Bytes proven(join.begin(), join.begin() + p::kHeaderBytes);
  proven.resize(p::kHeaderBytes + p::kTagBytes);
  p::SetSec(proven.data(), static_cast<uint8_t>(p::SecMode::kMac));
  EXPECT_TRUE(p::SealJoinProof(secret, nonce, proven.data()).ok());
  w.Send(proven);
  return proven;
}

TEST(SwitchdKeys, KeyedJobRunsAndEverythingElseIsRefused) {
  const auto admin = Secret(1);
  KeyDir dir(admin, 0600);
  SwitchProcess sw({"--port", "0", "--admin-key-file", dir.path(), "--require-job-keys", "1"});
  ASSERT_TRUE(sw.ok());
  EXPECT_EQ(sw.Output().find(Hex(admin)), std::string::npos) << "the admin secret was printed";

  // A JOIN before the job has a key, and one with a guessed id: unauthorized, one log line each.
  Worker w0(sw.port()), w1(sw.port()), op(sw.port()), rogue(sw.port());
  w0.Send(Join(5, 0, 2, 64, 2));
  rogue.Send(Join(6, 0, 1, 64, 2));
  for (Worker* w : {&w0, &rogue}) {
    auto e = w->Recv();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(p::GetType(e->data()), p::MsgType::kError);
    EXPECT_EQ(p::GetAux(e->data()), static_cast<uint16_t>(p::ErrorCode::kUnauthorized));
  }

  // The operator installs job 5's key; a replay of the same SET_KEY is dropped.
  const auto secret = Secret(2);
  const uint64_t seq = p::SetKeySequence(std::chrono::system_clock::now());
  const Bytes set_key = SetKey(admin, 5, secret, seq);
  op.Send(set_key);
  auto ack = op.Recv();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(p::GetType(ack->data()), p::MsgType::kSetKeyAck);
  EXPECT_EQ(p::GetJob(ack->data()), 5);
  op.Send(set_key);
  EXPECT_FALSE(op.Recv(milliseconds(100)).has_value());
  const Bytes forged_set_key = SetKey(Secret(9), 6, secret, seq + 1);  // another admin key
  rogue.Send(forged_set_key);
  EXPECT_FALSE(rogue.Recv(milliseconds(100)).has_value());

  // The job runs keyed: CRC-only data naming it and data under another secret are dropped; the
  // real data sum, and the result carries the down key's tag.
  // Its JOINs prove the secret. Before rank 1 joins, a rogue tries to take rank 1 with a guessed
  // proof, and replays rank 0's proof from its own address: both dropped (joins_unproven), and
  // answered only with a fresh challenge.
  p::Session salt{}, salt1{};
  const Bytes proof0 = ProveJoin(w0, Join(5, 0, 2, 64, 2), secret, &salt);
  const Bytes rogue_proof = ProveJoin(rogue, Join(5, 1, 2, 64, 2), Secret(4));
  auto again = rogue.Recv();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(p::GetType(again->data()), p::MsgType::kJoinChallenge);
  rogue.Send(proof0);
  again = rogue.Recv();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(p::GetType(again->data()), p::MsgType::kJoinChallenge);
  ProveJoin(w1, Join(5, 1, 2, 64, 2), secret, &salt1);
  EXPECT_EQ(salt1, salt) << "one salt per key, in every challenge";
  for (Worker* w : {&w0, &w1}) {
    auto a = w->Recv();
    ASSERT_TRUE(a.has_value());
    ASSERT_EQ(p::GetType(a->data()), p::MsgType::kJoinAck);
  }
  w1.Send(Data(5, 1, 0, 0, {100, 100}, p::flags::kInt32));      // a spoofer without the key
  w1.Send(KeyedData(Secret(3), salt, 5, 1, 0, 0, {100, 100}));  // another secret
  // An insider (rank 1 knows the secret) sealing data as rank 0: a good tag from the wrong
  // address, dropped by the source check before the engine opens it (drop_foreign_src).
  w1.Send(KeyedData(secret, salt, 5, 0, 0, 0, {1000, 1000}));
  w0.Send(KeyedData(secret, salt, 5, 0, 0, 0, {1, 2}));
  w1.Send(KeyedData(secret, salt, 5, 1, 0, 0, {10, 20}));
  const auto down = p::DeriveTrafficKey(secret, p::KeyDirection::kDown, 5, 1, salt).value();
  for (Worker* w : {&w0, &w1}) {
    auto r = w->Recv();
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(p::GetType(r->data()), p::MsgType::kResult);
    ASSERT_EQ(r->size(), p::MessageBytes(2, 1));
    EXPECT_TRUE(p::OpenOnce(down, p::SecMode::kMac, *r, p::MakeNonce(p::kRankAll, 0, 0), nullptr));
    EXPECT_EQ(p::Load32(r->data() + p::kHeaderBytes), 11u);
    EXPECT_EQ(p::Load32(r->data() + p::kHeaderBytes + 4), 22u);
  }
  auto c = sw.Stop();
  EXPECT_EQ(c["joins_unauthorized"], 2u);
  EXPECT_EQ(c["keys_installed"], 1u);
  EXPECT_EQ(c["admin_replayed"], 1u);
  EXPECT_EQ(c["admin_forged"], 1u);
  EXPECT_EQ(c["drop_cross_job"], 1u);
  EXPECT_EQ(c["drop_forged"], 1u);
  EXPECT_EQ(c["drop_foreign_src"], 1u);
  EXPECT_EQ(c["results"], 1u);
  EXPECT_EQ(c["join_challenges"], 5u);  // w0, rogue (twice after its failures), w1
  EXPECT_EQ(c["joins_proven"], 2u);
  EXPECT_EQ(c["joins_unproven"], 2u);
  EXPECT_EQ(c["err_rank_taken"], 0u);
  const std::string out = sw.Output();
  EXPECT_NE(out.find("JOIN for job 5 rank 0"), std::string::npos) << out;
  EXPECT_NE(out.find("JOIN for job 6 rank 0"), std::string::npos) << out;
  EXPECT_NE(out.find("JOIN for job 5 rank 1"), std::string::npos) << out;
  EXPECT_NE(out.find("does not verify"), std::string::npos) << out;
  EXPECT_EQ(out.find(Hex(secret)), std::string::npos) << "a job secret was printed";
}

TEST(SwitchdKeys, ASetKeySealedBeforeTheSwitchStartedIsRefused) {
  // What a recording replayed after a restart looks like: a genuine SET_KEY, sealed an hour
  // before this switch started. Refused (admin_replayed, one log line); a fresh one is taken.
  const auto admin = Secret(1);
  KeyDir dir(admin, 0600);
  const auto before = std::chrono::system_clock::now() - std::chrono::hours(1);
  SwitchProcess sw({"--port", "0", "--admin-key-file", dir.path()});
  ASSERT_TRUE(sw.ok());
  Worker op(sw.port());
  op.Send(SetKey(admin, 5, Secret(2), p::SetKeySequence(before)));
  EXPECT_FALSE(op.Recv(milliseconds(200)).has_value());
  op.Send(SetKey(admin, 5, Secret(2), p::SetKeySequence(std::chrono::system_clock::now())));
  auto ack = op.Recv();
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(p::GetType(ack->data()), p::MsgType::kSetKeyAck);
  auto c = sw.Stop();
  EXPECT_EQ(c["admin_replayed"], 1u);
  EXPECT_EQ(c["keys_installed"], 1u);
  const std::string out = sw.Output();
  EXPECT_NE(out.find("SET_KEY for job 5"), std::string::npos) << out;
  EXPECT_EQ(out.find(Hex(Secret(2))), std::string::npos) << "a job secret was printed";
}

TEST(SwitchdKeys, AdminKeyFileOthersMayReadIsRefusedAtStart) {
  KeyDir dir(Secret(1), 0644);
  const std::string cmd = std::string(INA_SWITCHD_BIN) + " --port 0 --admin-key-file " +
                          dir.path() + " > " + dir.path() + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_NE(WEXITSTATUS(rc), 0);
  std::ifstream in(dir.path() + ".out");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("chmod 600"), std::string::npos) << ss.str();
  std::remove((dir.path() + ".out").c_str());
}

#ifdef INA_JOBKEY_BIN
// The operator's tool: ina-jobkey installs a key from a secret file (then the job joins); with
// another admin key it gets no acknowledgement and says so.
TEST(SwitchdKeys, InaJobkeyInstallsAKey) {
  const auto admin = Secret(1);
  KeyDir dir(admin, 0600);
  KeyDir job_secret(Secret(2), 0600);
  KeyDir other_admin(Secret(8), 0600);
  SwitchProcess sw({"--port", "0", "--admin-key-file", dir.path(), "--require-job-keys", "1"});
  ASSERT_TRUE(sw.ok());
  auto run = [&](const std::string& admin_file) {
    const std::string cmd = std::string(INA_JOBKEY_BIN) +
                            " --switch 127.0.0.1:" + std::to_string(sw.port()) +
                            " --admin-key-file " + admin_file + " --job 7 --secret-file " +
                            job_secret.path() + " --timeout-ms 200 > /dev/null 2>&1";
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  EXPECT_EQ(run(other_admin.path()), 1);
  EXPECT_EQ(run(dir.path()), 0);
  Worker w(sw.port());
  ProveJoin(w, Join(7, 0, 1, 64, 2), Secret(2));
  auto a = w.Recv();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(p::GetType(a->data()), p::MsgType::kJoinAck);
  auto c = sw.Stop();
  EXPECT_EQ(c["keys_installed"], 1u);
  EXPECT_EQ(c["admin_forged"], 5u);  // the other admin key's five tries
}

// With --cores 2 (a switch of --cores 2 --core-ports 1) ina-jobkey installs the key at each core,
// port + 0 and port + 1, and a JOIN to either core's port is then challenged and proven. A --cores
// whose last port is past 65535 is bad usage.
TEST(SwitchdKeys, InaJobkeyInstallsAKeyAtEveryCore) {
  KeyDir dir(Secret(1), 0600);
  KeyDir job_secret(Secret(2), 0600);
  SwitchProcess sw({"--port", "0", "--admin-key-file", dir.path(), "--require-job-keys", "1",
                    "--cores", "2", "--core-ports", "1"});
  ASSERT_TRUE(sw.ok());
  auto run = [&](const std::string& endpoint, const std::string& cores) {
    const std::string cmd = std::string(INA_JOBKEY_BIN) + " --switch " + endpoint +
                            " --admin-key-file " + dir.path() + " --job 7 --secret-file " +
                            job_secret.path() + " --cores " + cores + " > /dev/null 2>&1";
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  EXPECT_EQ(run("127.0.0.1:65535", "2"), 2);
  EXPECT_EQ(run("127.0.0.1:" + std::to_string(sw.port()), "0"), 2);
  EXPECT_EQ(run("127.0.0.1:" + std::to_string(sw.port()), "2"), 0);
  for (uint16_t core = 0; core < 2; ++core) {
    Worker w(static_cast<uint16_t>(sw.port() + core));
    ProveJoin(w, Join(7, 0, 1, 64, 2), Secret(2));
    auto a = w.Recv();
    ASSERT_TRUE(a.has_value()) << "core " << core;
    EXPECT_EQ(p::GetType(a->data()), p::MsgType::kJoinAck) << "core " << core;
  }
  auto c = sw.Stop();
  EXPECT_EQ(c["keys_installed"], 2u);
  EXPECT_EQ(c["joins_proven"], 2u);
  EXPECT_EQ(c["joins_unauthorized"], 0u);
}
#endif

}  // namespace
}  // namespace ina::test
