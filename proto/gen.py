#!/usr/bin/env python3
"""Generate every language's view of the ina protocol from proto/ina.toml.

Usage: gen.py SPEC OUTDIR
Writes OUTDIR/ina/proto/wire.h, OUTDIR/ina_proto_pkg.sv, OUTDIR/protocol_table.md and
OUTDIR/kat.txt (messages with their CRC32C trailers), OUTDIR/crc32c_kat.txt (CRC32C known answers,
computed here by a plain table-driven CRC), plus the RoCEv2 view: OUTDIR/ina/proto/roce_wire.h and
OUTDIR/roce_kat.txt (whole IPv4 packets, ICRC by zlib.crc32), OUTDIR/sec_kat.txt (messages sealed
with their AES-GCM tags, computed here by a plain AES and GHASH), and OUTDIR/ina.lua, the Wireshark
dissector (the spec as a Lua table, then proto/dissector.lua). Standard library only, so that CMake
can run it on a bare machine.
"""
import pathlib
import re
import struct
import sys
import tomllib
import hashlib
import hmac
import ipaddress
import zlib

FMT = {1: "B", 2: "H", 4: "I"}
CTYPE = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t"}


# ---- CRC32C ([crc]) ---------------------------------------------------------------------------
# The reflected (LSB-first) register: a byte b is taken as reg = T[(reg ^ b) & 0xFF] ^ (reg >> 8).
# The CRC of a message is ~reg after the message from reg = 0xFFFFFFFF.

# ---- AES-128-GCM ([security]) -----------------------------------------------------------------
# Written out from FIPS 197 and NIST SP 800-38D, plainly and slowly: the known answers of the
# tagged messages come from here, independently of OpenSSL, which every C++ side uses.
def _xtime(a):
    return ((a << 1) ^ 0x1B) & 0xFF if a & 0x80 else a << 1


def _gmul8(a, b):
    r = 0
    while b:
        if b & 1:
            r ^= a
        a, b = _xtime(a), b >> 1
    return r


def _sbox():
    box = []
    for x in range(256):
        inv = next((y for y in range(1, 256) if _gmul8(x, y) == 1), 0)
        s = inv
        for i in range(1, 5):
            s ^= ((inv << i) | (inv >> (8 - i))) & 0xFF
        box.append(s ^ 0x63)
    return box


SBOX = _sbox()


def aes128_encrypt(key, block):
    w = [list(key[4 * i:4 * i + 4]) for i in range(4)]
    rcon = 1
    for i in range(4, 44):
        t = list(w[i - 1])
        if i % 4 == 0:
            t = [SBOX[b] for b in t[1:] + t[:1]]
            t[0] ^= rcon
            rcon = _xtime(rcon)
        w.append([a ^ b for a, b in zip(w[i - 4], t)])
    st = [b ^ k for b, k in zip(block, sum(w[0:4], []))]
    for rnd in range(1, 11):
        st = [SBOX[b] for b in st]
        st = [st[(c * 4 + r + 4 * r) % 16] for c in range(4) for r in range(4)]  # ShiftRows
        if rnd != 10:
            mixed = []
            for c in range(4):
                a = st[4 * c:4 * c + 4]
                mixed += [_gmul8(a[0], 2) ^ _gmul8(a[1], 3) ^ a[2] ^ a[3],
                          a[0] ^ _gmul8(a[1], 2) ^ _gmul8(a[2], 3) ^ a[3],
                          a[0] ^ a[1] ^ _gmul8(a[2], 2) ^ _gmul8(a[3], 3),
                          _gmul8(a[0], 3) ^ a[1] ^ a[2] ^ _gmul8(a[3], 2)]
            st = mixed
        st = [b ^ k for b, k in zip(st, sum(w[4 * rnd:4 * rnd + 4], []))]
    return bytes(st)


def _ghash_mul(x, y):
    r, v = 0, y
    for i in range(127, -1, -1):
        if (x >> i) & 1:
            r ^= v
        v = (v >> 1) ^ (0xE1 << 120) if v & 1 else v >> 1
    return r


def aes_gcm(key, iv, aad, plain):
    """(ciphertext, tag) of AES-128-GCM with a 96-bit IV."""
    h = int.from_bytes(aes128_encrypt(key, bytes(16)), "big")
    ctr = int.from_bytes(iv + b"\0\0\0\1", "big")
    out = bytearray()
    for i in range(0, len(plain), 16):
        ctr = (ctr & ~0xFFFFFFFF) | ((ctr + 1) & 0xFFFFFFFF)
        ks = aes128_encrypt(key, ctr.to_bytes(16, "big"))
        out += bytes(a ^ b for a, b in zip(plain[i:i + 16], ks))
    y = 0
    for data in (aad, bytes(out)):
        for i in range(0, len(data), 16):
            y = _ghash_mul(y ^ int.from_bytes(data[i:i + 16].ljust(16, b"\0"), "big"), h)
    y = _ghash_mul(y ^ (len(aad) * 8 << 64 | len(out) * 8), h)
    tag = bytes(a ^ b for a, b in zip(y.to_bytes(16, "big"), aes128_encrypt(key, iv + b"\0\0\0\1")))
    return bytes(out), tag


def traffic_key(spec, secret, direction, job, grant, session):
    """[security]'s per-grant traffic key: HMAC-SHA256 of the derivation label, truncated."""
    info = b"ina/v2/" + direction.encode() + b"/" + struct.pack(">HQ", job, grant) + session
    return hmac.new(secret, info, hashlib.sha256).digest()[:spec["security"]["key_bytes"]]


def seal(spec, msg, mode, key, use):
    """Header and payload `msg` (no trailer) in sec mode 1 or 2, sealed: the tag in place of the
    CRC32C trailer; mode 2 encrypts the payload. The nonce: rank | slot | use."""
    hb = spec["protocol"]["header_bytes"]
    retx = 1 << next(f["bit"] for f in spec["flag"] if f["name"] == "retx")
    header = bytearray(msg[:hb])
    header[2] &= ~retx & 0xFF
    iv = bytes(msg[8:12]) + struct.pack(">Q", use)
    if mode == 1:
        _, tag = aes_gcm(key, iv, bytes(header) + msg[hb:], b"")
        return msg + tag
    ct, tag = aes_gcm(key, iv, bytes(header), msg[hb:])
    return msg[:hb] + ct + tag


def reflect32(x):
    return int(f"{x:032b}"[::-1], 2)


def crc_table(poly_reflected):
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (poly_reflected if c & 1 else 0)
        t.append(c)
    return t


class Crc:
    def __init__(self, spec, c=None):
        """[crc] (the CRC32C trailer), or c: a dict with poly, init, xorout (the ICRC's)."""
        c = spec["crc"] if c is None else c
        self.poly = reflect32(c["poly"])
        self.init = c["init"]
        self.xorout = c["xorout"]
        self.table = crc_table(self.poly)
        # The top byte of T[i] is a bijection of i (the polynomial's x^32 term): it undoes a step.
        self.untop = {self.table[i] >> 24: i for i in range(256)}
        if len(self.untop) != 256:
            sys.exit("gen.py: [crc] table top bytes are not a bijection")

    def reg(self, data, reg):
        """The raw register after `data` from `reg` (no init, no xorout)."""
        t = self.table
        for b in data:
            reg = t[(reg ^ b) & 0xFF] ^ (reg >> 8)
        return reg

    def __call__(self, data):
        return self.reg(data, self.init) ^ self.xorout

    def unstep(self, reg):
        """The register one zero byte earlier: the inverse of reg -> reg(b"\0", reg)."""
        i = self.untop[reg >> 24]
        return (((reg ^ self.table[i]) << 8) | i) & 0xFFFFFFFF


def crc_trailer(crc, message):
    """The 4 trailer bytes of `message`: its CRC, little-endian."""
    return struct.pack("<I", crc(message))


def camel(name):
    return "".join(p.capitalize() for p in name.split("_"))


def check(spec):
    p = spec["protocol"]
    fields = spec["field"]
    end = 0
    for f in fields:
        if f["offset"] != end:
            sys.exit(f"gen.py: field {f['name']} at {f['offset']}, expected {end} (no gaps)")
        if f["bytes"] not in FMT:
            sys.exit(f"gen.py: field {f['name']} has unsupported width {f['bytes']}")
        end += f["bytes"]
    if end != p["header_bytes"]:
        sys.exit(f"gen.py: fields cover {end} bytes, header_bytes says {p['header_bytes']}")
    if p["frame_prefix_bytes"] + p["header_bytes"] != p["payload_offset"]:
        sys.exit("gen.py: payload_offset != frame_prefix_bytes + header_bytes")
    c = spec["crc"]
    crc = Crc(spec)
    if p["crc_bytes"] != 4 or c["name"] != "crc32c":
        sys.exit("gen.py: the trailer is a 4-byte CRC32C")
    if crc(b"123456789") != c["check"]:
        sys.exit(f"gen.py: [crc] check 0x{c['check']:08X} != 0x{crc(b'123456789'):08X}")
    for m in (b"", b"ina", bytes(range(256)) * 5):
        if crc.reg(m + crc_trailer(crc, m), crc.init) != c["residue"]:
            sys.exit("gen.py: [crc] residue does not hold")
    if c["beat_bytes"] != 64 or p["frame_prefix_bytes"] >= c["beat_bytes"]:
        sys.exit("gen.py: [crc] beat_bytes must be 64 and hold the frame prefix")
    sec = spec["security"]
    if sec["tag_bytes"] != 16 or sec["key_bytes"] != 16 or sec["nonce_bytes"] != 12:
        sys.exit("gen.py: [security] is AES-128-GCM: 16-byte tags and keys, 12-byte nonces")
    if not 16 <= sec["secret_min_bytes"] <= sec["secret_max_bytes"]:
        sys.exit("gen.py: [security] a job secret has at least 128 bits")
    if [m["value"] for m in spec["sec_mode"]] != [0, 1, 2]:
        sys.exit("gen.py: sec_mode values are 0 crc, 1 mac, 2 mac_encrypt")
    # The AES and GHASH below against NIST's GCM test case 4 (McGrew and Viega).
    _, tag = aes_gcm(bytes.fromhex("feffe9928665731c6d6a8f9467308308"),
                     bytes.fromhex("cafebabefacedbaddecaf888"),
                     bytes.fromhex("feedfacedeadbeeffeedfacedeadbeefabaddad2"),
                     bytes.fromhex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                                   "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39"))
    if tag.hex() != "5bc94fbc3221a5db94fae95ae7121a47":
        sys.exit("gen.py: AES-GCM does not reproduce NIST's test case 4")
    for kind in ("msg_type", "flag", "error_code", "join_param", "counter", "register",
                 "roce_counter", "sec_mode"):
        names = [x["name"] for x in spec[kind]]
        if len(set(names)) != len(names):
            sys.exit(f"gen.py: duplicate {kind} names")
    check_views(spec)
    if {x["name"] for x in spec["counter"]} & {x["name"] for x in spec["roce_counter"]}:
        sys.exit("gen.py: a roce_counter has a counter's name")
    for c in spec["counter"]:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", c.get("metric", c["name"])):
            sys.exit(f"gen.py: counter {c['name']}: metric is not a Prometheus name")
    if len(spec["counter"]) + len(spec["roce_counter"]) > 64:
        sys.exit("gen.py: more than 64 counters (ina_regs decodes 6 bits of counter index)")
    width = spec["registers"]["width"]
    for r in spec["register"]:
        if r["reset"] >> width:
            sys.exit(f"gen.py: register {r['name']} reset does not fit {width} bits")
        used = 0
        names = set()
        for f in r.get("fields", []):
            lsb, w = f["lsb"], f["width"]
            if w < 1 or lsb < 0 or lsb + w > width:
                sys.exit(f"gen.py: field {r['name']}.{f['name']} outside bits 0..{width - 1}")
            mask = ((1 << w) - 1) << lsb
            if used & mask:
                sys.exit(f"gen.py: field {r['name']}.{f['name']} overlaps another field")
            if f["name"] in names:
                sys.exit(f"gen.py: duplicate field {r['name']}.{f['name']}")
            used |= mask
            names.add(f["name"])


VIEW_ENUMS = ("msg_type", "error_code", "join_param")


def check_views(spec):
    """A `view` ([[msg_type]], [[error_code]]) names header fields and enum tables that exist,
    each field once; an error message's views (its type's and every error code's) share the
    namespace ina.error.<name>, so one name there is one field, enum and doc."""
    fields = {f["name"] for f in spec["field"]}
    error_names = {}
    for kind in ("msg_type", "error_code"):
        for m in spec[kind]:
            seen = set()
            for v in m.get("view", []):
                where = f"{kind} {m['name']} view {v.get('name')}"
                keys = set(v)
                if keys - {"field", "name", "doc", "enum"} or not {"field", "name", "doc"} <= keys:
                    sys.exit(f"gen.py: {where}: keys are field, name, doc and optionally enum")
                if v["field"] not in fields or v["field"] in seen:
                    sys.exit(f"gen.py: {where}: not a header field, or named twice")
                if v.get("enum", VIEW_ENUMS[0]) not in VIEW_ENUMS:
                    sys.exit(f"gen.py: {where}: enum is one of {', '.join(VIEW_ENUMS)}")
                seen.add(v["field"])
                if kind == "error_code" or m["name"] == "error":
                    if error_names.setdefault(v["name"], v) != v:
                        sys.exit(f"gen.py: {where}: ina.error.{v['name']} defined differently")
    if "error" not in {m["name"] for m in spec["msg_type"]}:
        sys.exit("gen.py: error_code views need a msg_type named error")


def bits(f):
    """Verilog-style bit range of a register field: [hi:lo] or [b]."""
    lo, hi = f["lsb"], f["lsb"] + f["width"] - 1
    return f"[{lo}]" if lo == hi else f"[{hi}:{lo}]"


def cpp_escape(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


DROPPED_HELP = "Packets the switch dropped, by reason (docs/protocol_table.md and docs/switchd.md)."


# (family, reason, help) of a [[counter]] in Prometheus terms (see ina.toml's counter comment).
def counter_metric(spec, c):
    if c["name"].startswith("drop_") and "metric" not in c:
        return "ina_switch_dropped_packets_total", c["name"][len("drop_"):], DROPPED_HELP
    return f"ina_switch_{c.get('metric', c['name'])}_total", "", c["doc"]


def encode_kat(spec, kat):
    """The whole message: header, payload, CRC32C trailer."""
    out = b""
    for f in spec["field"]:
        out += struct.pack(">" + FMT[f["bytes"]], kat[f["name"]])
    for v in kat["payload"]:
        out += struct.pack(">i", v)
    return out + crc_trailer(Crc(spec), out)


ENUM_CTYPE = {"msg_type": "MsgType", "error_code": "ErrorCode", "join_param": "JoinParam"}


def field_ctype(f):
    """The C++ type of a header field: the type field is a MsgType, the others unsigned ints."""
    return "MsgType" if f["name"] == "type" else CTYPE[f["bytes"]]


def gen_typed_messages(spec, w):
    """Per message type, a struct whose members are the header's fields under the names the
    type's `view` gives them (the rest under their general names), in wire order, so that a
    message is built with designated initializers in its own vocabulary:
      p::JoinMsg{.job = 7, .rank = 1, .k = 256, .window = 64, .world_size = 4}.Encode(buf)
    ToHeader/Encode fill in version and type; From/Decode read any header as this type (the
    caller checked the type). The error message also gets each error code's names as accessors."""
    fields = [f for f in spec["field"] if f["name"] not in ("version", "type")]
    error_views = {}
    for e in spec["error_code"]:
        for v in e.get("view", []):
            error_views.setdefault(v["name"], (v, []))[1].append(e["name"])
    w("// ---- Typed messages: one per message type (gen.py, gen_typed_messages). Members are the")
    w("// header's fields in wire order, named as the type names them; build one with designated")
    w("// initializers and Encode it, or Decode a header of that type. The bytes are EncodeHeader's.")
    for m in spec["msg_type"]:
        view = {v["field"]: v for v in m.get("view", [])}
        cls = camel(m["name"]) + "Msg"
        w("")
        w(f"// {m['name']}: {m['doc']}")
        w(f"struct {cls} {{")
        w(f"  static constexpr MsgType kType = MsgType::k{camel(m['name'])};")
        members = []
        for f in fields:
            v = view.get(f["name"])
            name = v["name"] if v else f["name"]
            ctype = ENUM_CTYPE[v["enum"]] if v and "enum" in v else CTYPE[f["bytes"]]
            members.append((f, name, ctype))
            init = f"{ctype}{{}}" if ctype != CTYPE[f["bytes"]] else "0"
            doc = f"  // {f['name']}: {v['doc']}" if v else ""
            w(f"  {ctype} {name} = {init};{doc}")
        w("")
        w("  constexpr Header ToHeader() const {")
        w("    Header h;")
        w("    h.version = kVersion;")
        w("    h.type = kType;")
        for f, name, ctype in members:
            val = name if ctype == CTYPE[f["bytes"]] else f"static_cast<{CTYPE[f['bytes']]}>({name})"
            w(f"    h.{f['name']} = {val};")
        w("    return h;")
        w("  }")
        w(f"  static constexpr {cls} From(const Header& h) {{")
        w(f"    {cls} m;")
        for f, name, ctype in members:
            val = f"h.{f['name']}" if ctype == CTYPE[f["bytes"]] else f"static_cast<{ctype}>(h.{f['name']})"
            w(f"    m.{name} = {val};")
        w("    return m;")
        w("  }")
        w("  constexpr void Encode(uint8_t* h) const { EncodeHeader(ToHeader(), h); }")
        w(f"  static constexpr {cls} Decode(const uint8_t* h) {{ return From(DecodeHeader(h)); }}")
        if m["name"] == "error":
            w("")
            w("  // What the general fields mean for particular error codes ([[error_code]] views).")
            for name, (v, codes) in error_views.items():
                f = next(x for x in spec["field"] if x["name"] == v["field"])
                raw = CTYPE[f["bytes"]]
                ctype = ENUM_CTYPE[v["enum"]] if "enum" in v else raw
                get = v["field"] if ctype == raw else f"static_cast<{ctype}>({v['field']})"
                put = "v" if ctype == raw else f"static_cast<{raw}>(v)"
                w(f"  // {', '.join(codes)}: {v['doc']}")
                w(f"  constexpr {ctype} {name}() const {{ return {get}; }}")
                w(f"  constexpr {cls}& set_{name}({ctype} v) {{")
                w(f"    {v['field']} = {put};")
                w("    return *this;")
                w("  }")
        w(f"  friend bool operator==(const {cls}&, const {cls}&) = default;")
        w("};")
    w("")


def gen_cpp(spec):
    p = spec["protocol"]
    L = []
    w = L.append
    w("// GENERATED by proto/gen.py from proto/ina.toml. Do not edit.")
    w("//")
    w("// The ina wire header: constants, enums and big-endian field accessors. Accessors take a")
    w("// pointer to the first byte of the ina header (the UDP payload); the caller guarantees")
    w(f"// kHeaderBytes ({p['header_bytes']}) readable/writable bytes.")
    w("#pragma once")
    w("")
    w("#include <array>")
    w("#include <cstddef>")
    w("#include <cstdint>")
    w("#include <string_view>")
    w("")
    w("namespace ina::proto {")
    w("")
    w(f"inline constexpr uint8_t kVersion = {p['version']};")
    w(f"inline constexpr uint16_t kDefaultUdpPort = {p['udp_port']};")
    w(f"inline constexpr size_t kHeaderBytes = {p['header_bytes']};")
    w(f"inline constexpr size_t kFramePrefixBytes = {p['frame_prefix_bytes']};")
    w(f"inline constexpr size_t kPayloadOffset = {p['payload_offset']};")
    w(f"inline constexpr size_t kElemBytes = {p['elem_bytes']};")
    w(f"inline constexpr size_t kCrcBytes = {p['crc_bytes']};  // the CRC32C trailer of every message")
    ks = ", ".join(str(k) for k in p["k_values"])
    w(f"inline constexpr std::array<uint16_t, {len(p['k_values'])}> kKValues = {{{ks}}};")
    w(f"inline constexpr uint16_t kMaxK = {max(p['k_values'])};")
    kt = ", ".join(str(k) for k in p["k_values"][:-1]) + f" or {p['k_values'][-1]}"
    w(f"inline constexpr std::string_view kKValuesText = \"{kt}\";  // for error messages")

    w(f"inline constexpr uint16_t kMaxWorkers = {p['max_workers']};")
    w(f"inline constexpr uint16_t kMaxLanes = {p['max_lanes']};  // peers per rank (JOIN gen)")
    w(f"inline constexpr int kExpBias = {p['exp_bias']};")
    w(f"inline constexpr int kExpMin = {p['exp_min']};")
    w(f"inline constexpr int kExpMax = {p['exp_max']};")
    w("inline constexpr uint8_t kExpNone = 0;  // biased exponent meaning \"no block\"")
    w(f"inline constexpr uint16_t kGenWindow = {p['gen_window']};")
    w(f"inline constexpr uint16_t kAllocJobMin = {p['alloc_job_min']};  // fabric-allocated job ids: kAllocJobMin .. 65535")
    w("inline constexpr uint16_t kRankAll = 0xFFFF;  // result destination: every rank")
    w(f"inline constexpr uint32_t kJoinValueNone = 0x{p['join_value_none']:08X};  // ERROR offset: no value")
    w("")
    sec = spec["security"]
    w("// Authenticated jobs ([security] in proto/ina.toml, docs/security.md): in sec modes mac and")
    w("// mac_encrypt a message ends with an AES-GCM tag in place of the CRC32C trailer.")
    w(f"inline constexpr size_t kTagBytes = {sec['tag_bytes']};")
    w(f"inline constexpr size_t kKeyBytes = {sec['key_bytes']};  // AES-128 traffic keys")
    w(f"inline constexpr size_t kSecretMinBytes = {sec['secret_min_bytes']};  // a job secret")
    w(f"inline constexpr size_t kSecretMaxBytes = {sec['secret_max_bytes']};")
    w(f"inline constexpr size_t kNonceBytes = {sec['nonce_bytes']};  // rank | slot | use")
    w(f"inline constexpr std::string_view kKdfUp = \"{sec['kdf_up']}\";  // traffic-key labels")
    w(f"inline constexpr std::string_view kKdfDown = \"{sec['kdf_down']}\";")
    w(f"inline constexpr std::string_view kKdfJoin = \"{sec['kdf_join']}\";  // a proven JOIN's key")
    w(f"inline constexpr size_t kJoinNonceBytes = {sec['join_nonce_bytes']};  // a join_challenge's nonce")
    w(f"inline constexpr size_t kSessionSaltBytes = {sec['session_salt_bytes']};  // then the key's salt")
    w("inline constexpr size_t kJoinChallengeBytes = kJoinNonceBytes + kSessionSaltBytes;  // its payload")
    w("// The largest ina message in any sec mode: header, kMaxK elements, the longer trailer (the")
    w("// tag). Buffers are this size; a longer datagram is no ina message.")
    w("inline constexpr size_t kMaxPacketBytes =")
    w("    kHeaderBytes + kMaxK * kElemBytes + (kTagBytes > kCrcBytes ? kTagBytes : kCrcBytes);")
    c = spec["crc"]
    w("")
    w("// The CRC32C trailer ([crc] in proto/ina.toml): the CRC32C of every byte of the message before")
    w("// it, stored little-endian in the message's last kCrcBytes bytes. ina/proto/crc32c.h computes it.")
    w(f"inline constexpr uint32_t kCrc32cPolyReflected = 0x{reflect32(c['poly']):08X};")
    w(f"inline constexpr uint32_t kCrc32cCheck = 0x{c['check']:08X};  // CRC32C(\"123456789\")")
    w(f"inline constexpr uint32_t kCrc32cResidue = 0x{c['residue']:08X};  // register after message + trailer")
    w("// Bytes of a message with `count` payload elements, trailer included.")
    w("inline constexpr size_t MessageBytes(size_t count) {")
    w("  return kHeaderBytes + count * kElemBytes + kCrcBytes;")
    w("}")
    w("// Bytes of the trailer in sec mode `sec`: the CRC32C (crc) or the tag (mac, mac_encrypt); 0")
    w("// for a value that is no mode.")
    w("inline constexpr size_t TrailerBytes(uint8_t sec) {")
    w("  return sec == 0 ? kCrcBytes : sec <= 2 ? kTagBytes : 0;")
    w("}")
    w("// Bytes of a message with `count` payload elements in sec mode `sec` (crc: MessageBytes).")
    w("inline constexpr size_t MessageBytes(size_t count, uint8_t sec) {")
    w("  return kHeaderBytes + count * kElemBytes + TrailerBytes(sec);")
    w("}")
    w("inline constexpr uint32_t LoadCrc(const uint8_t* p) {")
    w("  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);")
    w("}")
    w("inline constexpr void StoreCrc(uint8_t* p, uint32_t v) {")
    w("  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));")
    w("}")
    w("")
    w("inline constexpr bool IsValidK(uint32_t k) {")
    w("  for (uint16_t v : kKValues) if (v == k) return true;")
    w("  return false;")
    w("}")
    w("// The largest K whose message (header, K elements, trailer) is at most max_message_bytes; 0")
    w("// when not even the smallest fits. What a sender uses as its default K for a path: a")
    w("// transport's largest message (UDP: path MTU - 28, RoCE: the path MTU) goes in.")
    w("inline constexpr uint16_t LargestKFor(size_t max_message_bytes) {")
    w("  uint16_t best = 0;")
    w("  for (uint16_t v : kKValues) if (MessageBytes(v) <= max_message_bytes && v > best) best = v;")
    w("  return best;")
    w("}")
    w("")
    for kind, enum, typ in (("msg_type", "MsgType", "uint8_t"), ("error_code", "ErrorCode", "uint16_t"),
                            ("join_param", "JoinParam", "uint16_t"), ("sec_mode", "SecMode", "uint8_t")):
        w(f"enum class {enum} : {typ} {{")
        for m in spec[kind]:
            w(f"  k{camel(m['name'])} = {m['value']},  // {m['doc']}")
        w("};")
        w("")
        w(f"inline constexpr std::string_view {enum}Name({typ} v) {{")
        w("  switch (v) {")
        for m in spec[kind]:
            w(f"    case {m['value']}: return \"{m['name']}\";")
        w("    default: return \"unknown\";")
        w("  }")
        w("}")
        w(f"inline constexpr std::string_view {enum}Name({enum} v) {{")
        w(f"  return {enum}Name(static_cast<{typ}>(v));")
        w("}")
        w("")
    w("namespace flags {")
    for f in spec["flag"]:
        w(f"inline constexpr uint8_t k{camel(f['name'])} = 1u << {f['bit']};  // {f['doc']}")
    w("}  // namespace flags")
    w("")
    w("// Big-endian loads and stores.")
    w("inline constexpr uint8_t Load8(const uint8_t* p) { return p[0]; }")
    w("inline constexpr uint16_t Load16(const uint8_t* p) {")
    w("  return static_cast<uint16_t>((p[0] << 8) | p[1]);")
    w("}")
    w("inline constexpr uint32_t Load32(const uint8_t* p) {")
    w("  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];")
    w("}")
    w("inline constexpr void Store8(uint8_t* p, uint8_t v) { p[0] = v; }")
    w("inline constexpr void Store16(uint8_t* p, uint16_t v) {")
    w("  p[0] = static_cast<uint8_t>(v >> 8);")
    w("  p[1] = static_cast<uint8_t>(v);")
    w("}")
    w("inline constexpr void Store32(uint8_t* p, uint32_t v) {")
    w("  p[0] = static_cast<uint8_t>(v >> 24);")
    w("  p[1] = static_cast<uint8_t>(v >> 16);")
    w("  p[2] = static_cast<uint8_t>(v >> 8);")
    w("  p[3] = static_cast<uint8_t>(v);")
    w("}")
    w("")
    w("// Field offsets and accessors.")
    w("// The type field reads and writes as a MsgType (a value no message type has reads as itself:")
    w("// MsgTypeName gives \"unknown\").")
    for f in spec["field"]:
        n, b = f["name"], f["bytes"]
        c = camel(n)
        t = field_ctype(f)
        w(f"inline constexpr size_t k{c}Offset = {f['offset']};  // {f['doc']}")
        if t == CTYPE[b]:
            w(f"inline constexpr {t} Get{c}(const uint8_t* h) {{ return Load{8 * b}(h + {f['offset']}); }}")
            w(f"inline constexpr void Set{c}(uint8_t* h, {t} v) {{ Store{8 * b}(h + {f['offset']}, v); }}")
        else:
            w(f"inline constexpr {t} Get{c}(const uint8_t* h) {{")
            w(f"  return static_cast<{t}>(Load{8 * b}(h + {f['offset']}));")
            w("}")
            w(f"inline constexpr void Set{c}(uint8_t* h, {t} v) {{")
            w(f"  Store{8 * b}(h + {f['offset']}, static_cast<{CTYPE[b]}>(v));")
            w("}")
    w("inline constexpr bool IsType(const uint8_t* h, MsgType t) { return GetType(h) == t; }")
    w("")
    w("// A host-order copy of every header field, under the field's general name; a message")
    w("// type's own names are in its typed message below.")
    w("struct Header {")
    for f in spec["field"]:
        t = field_ctype(f)
        w(f"  {t} {f['name']} = {t}{{}};" if t != CTYPE[f["bytes"]] else f"  {t} {f['name']} = 0;")
    w("  friend bool operator==(const Header&, const Header&) = default;")
    w("};")
    w("")
    w("inline constexpr Header DecodeHeader(const uint8_t* h) {")
    w("  Header x;")
    for f in spec["field"]:
        w(f"  x.{f['name']} = Get{camel(f['name'])}(h);")
    w("  return x;")
    w("}")
    w("")
    w("// Every header field's name, offset and width in bytes, in wire order (for reports that")
    w("// name the field a byte belongs to).")
    w("struct HeaderField {")
    w("  std::string_view name;")
    w("  size_t offset;")
    w("  size_t bytes;")
    w("};")
    nf = len(spec["field"])
    w(f"inline constexpr std::array<HeaderField, {nf}> kHeaderFields = {{{{")
    for f in spec["field"]:
        w(f'    {{"{f["name"]}", {f["offset"]}, {f["bytes"]}}},')
    w("}};")
    w("")
    w("inline constexpr void EncodeHeader(const Header& x, uint8_t* h) {")
    for f in spec["field"]:
        w(f"  Set{camel(f['name'])}(h, x.{f['name']});")
    w("}")
    w("")
    gen_typed_messages(spec, w)

    # A counter list: its enum, its size and its names, all in the list's order.
    def counter_enum(enum, key):
        w(f"enum class {enum} : uint16_t {{")
        for i, c in enumerate(spec[key]):
            w(f"  k{camel(c['name'])} = {i},  // {c['doc']}")
        w("};")
        w(f"inline constexpr size_t kNum{enum}s = {len(spec[key])};")
        names = ", ".join(f'"{c["name"]}"' for c in spec[key])
        w(f"inline constexpr std::array<std::string_view, kNum{enum}s> k{enum}Names = {{{names}}};")
        w("")

    w("// Per-cause counters, in the order every fabric keeps them (and the register map uses).")
    counter_enum("Counter", "counter")
    w("// Prometheus view of each Counter (ina-switchd --metrics): the family's name, the reason")
    w("// label (drop_<reason> counters share ina_switch_dropped_packets_total) and the HELP text.")
    w("struct CounterMetric {")
    w("  std::string_view family;")
    w("  std::string_view reason;  // empty: no reason label")
    w("  std::string_view help;")
    w("};")
    w("inline constexpr std::array<CounterMetric, kNumCounters> kCounterMetrics = {{")
    for c in spec["counter"]:
        family, reason, help_ = counter_metric(spec, c)
        w(f'    {{"{family}", "{reason}", "{cpp_escape(help_)}"}},')
    w("}};")
    w("")
    w("// Drop counters of the hardware fabric's RoCEv2 ingress; in its register map after the")
    w("// Counters (reg::kRoceCounterBase). Not engine counters (no engine sees RoCE headers).")
    counter_enum("RoceCounter", "roce_counter")
    w("// Register map of the hardware fabric's control interface (byte addresses). A register with")
    w("// fields has a namespace of the same name: for each field k<Field>Lsb, k<Field>Width,")
    w("// k<Field>Max (largest value), Get<Field>(reg) and Set<Field>(reg, v), which returns reg with")
    w("// the field replaced by v. REQUIRES for Set: v <= k<Field>Max (higher bits are dropped; check")
    w("// with Fits<Field> where v comes from outside).")
    w("namespace reg {")
    for r in spec["register"]:
        w(f"inline constexpr uint32_t k{camel(r['name'])} = 0x{r['addr']:03X};  // {r['access']}: {r['doc']}")
        w(f"inline constexpr uint32_t k{camel(r['name'])}Reset = 0x{r['reset']:08X};")
    w("// The RoCEv2 ingress counters (RoceCounter order), after the Counters.")
    w("inline constexpr uint32_t kRoceCounterBase = kCounterBase + 4 * kNumCounters;")
    for r in spec["register"]:
        if not r.get("fields"):
            continue
        w("")
        w(f"namespace {r['name']} {{")
        for f in r["fields"]:
            c = camel(f["name"])
            mx = (1 << f["width"]) - 1
            w(f"// {bits(f)} {f['name']}: {f['doc']}")
            w(f"inline constexpr uint32_t k{c}Lsb = {f['lsb']};")
            w(f"inline constexpr uint32_t k{c}Width = {f['width']};")
            w(f"inline constexpr uint32_t k{c}Max = 0x{mx:X};")
            w(f"inline constexpr uint32_t Get{c}(uint32_t r) {{ return (r >> k{c}Lsb) & k{c}Max; }}")
            w(f"inline constexpr bool Fits{c}(uint64_t v) {{ return v <= k{c}Max; }}")
            w(f"inline constexpr uint32_t Set{c}(uint32_t r, uint32_t v) {{")
            w(f"  return (r & ~(k{c}Max << k{c}Lsb)) | ((v & k{c}Max) << k{c}Lsb);")
            w("}")
        w(f"}}  // namespace {r['name']}")
    w("}  // namespace reg")
    w("")
    w("}  // namespace ina::proto")
    return "\n".join(L) + "\n"


def icrc_params(spec):
    r = spec["roce"]
    return {"poly": r["icrc_poly"], "init": r["icrc_init"], "xorout": r["icrc_xorout"],
            "residue": r["icrc_residue"], "check": r["icrc_check"]}


# Bytes of an Ethernet + IPv4 (no options) + UDP + BTH frame the ICRC takes as all-ones: IP TOS,
# TTL and header checksum, UDP checksum, BTH byte 4 (docs/rdma.md). The ICRC covers the frame from
# the IPv4 header (byte 14), after 8 bytes of 0xFF.
ICRC_START = 14
ICRC_ONES = (14 + 1, 14 + 8, 14 + 10, 14 + 11, 34 + 6, 34 + 7, 42 + 4)


def crc_beat_maps(spec, icrc=False):
    """The CRC32C's linear maps over one beat of B bytes (B = [crc] beat_bytes), for
    rtl/core/ina_crc32c.sv. A beat taken whole from register r gives A^B r xor D(beat); D is linear
    in the beat's bits (bit j = byte j // 8, bit j % 8, as tdata holds them). Returns rows: a
    matrix is a list of 32 ints, row o = the mask of input bits that XOR into output bit o."""
    c = icrc_params(spec) if icrc else spec["crc"]
    crc = Crc(spec, c)
    nb = spec["crc"]["beat_bytes"]
    start = ICRC_START if icrc else spec["protocol"]["frame_prefix_bytes"]

    def rows(columns):
        return [sum(((col >> o) & 1) << j for j, col in enumerate(columns)) for o in range(32)]

    def zeros(reg, n):
        return crc.reg(bytes(n), reg)

    def back(reg, n):
        for _ in range(n):
            reg = crc.unstep(reg)
        return reg

    beat = []
    for j in range(8 * nb):
        data = bytearray(nb)
        data[j // 8] = 1 << (j % 8)
        beat.append(crc.reg(bytes(data), 0))
    adv = [zeros(1 << m, nb) for m in range(32)]
    # Rewinding by n bytes (n = 0, 4, ..., B-4): a beat whose data ends at byte hi was taken whole,
    # as if followed by B-hi zero bytes; A^-(B-hi) undoes them.
    rewind = [rows([back(1 << m, 4 * k) for m in range(32)]) for k in range(nb // 4)]
    res = c["residue"]
    first = zeros(crc.init, nb - start)
    ones = 0
    if icrc:
        # From the register after 8 bytes of 0xFF, and with the all-ones bytes in: the module takes
        # them as zero (first_zero), so their contribution is folded in here.
        tmpl = bytearray(nb)
        for i in ICRC_ONES:
            tmpl[i] = 0xFF
            ones |= 1 << i
        first = crc.reg(bytes(tmpl[start:]), crc.reg(b"\xff" * 8, crc.init))
    return {
        "beat": rows(beat),
        "adv": rows(adv),
        # Register after the first beat's bytes 0 .. start-1 taken as zeros from a zero register
        # and the header bytes from init: A^(B-start) init, xored with D(the beat, bytes < start
        # zeroed).
        "first": first,
        "first_zero": ones,
        # A frame ending at byte hi of its last beat is good iff the register, taken whole,
        # equals A^(B-hi) residue: entry n = A^n residue.
        "residue_at": [zeros(res, n) for n in range(nb)],
        "rewind": rewind,
        "nb": nb,
        "start": start,
    }


def beat_check(maps, frame):
    """rtl/core/ina_crc32c.sv's Check = 1 algorithm on `frame`, with the generated maps."""
    nb = maps["nb"]

    def apply(rows_, v):
        return sum(((bin(r & v).count("1") & 1) << o) for o, r in enumerate(rows_))

    reg = 0
    for b0 in range(0, len(frame), nb):
        beat = bytearray(frame[b0:b0 + nb])
        n = len(beat)
        if b0 == 0:
            for i in range(nb if n == nb else n):
                if i < maps["start"] or (maps["first_zero"] >> i) & 1:
                    beat[i] = 0
        beat += bytes(nb - n)
        d = apply(maps["beat"], int.from_bytes(beat, "little"))
        reg = (maps["first"] if b0 == 0 else apply(maps["adv"], reg)) ^ d
    return reg == maps["residue_at"][nb - n]


def sv_flat(rows_list, width):
    """A flat vector: row i at [i*width +: width]."""
    v = 0
    for i, r in enumerate(rows_list):
        v |= r << (i * width)
    bits = width * len(rows_list)
    return f"{bits}'h{v:0{bits // 4}X}"


def gen_sv(spec):
    p = spec["protocol"]
    L = []
    w = L.append
    w("// GENERATED by proto/gen.py from proto/ina.toml. Do not edit.")
    w("package ina_proto_pkg;")
    w("")
    w(f"  localparam int unsigned Version = {p['version']};")
    w(f"  localparam int unsigned HeaderBytes = {p['header_bytes']};")
    w(f"  localparam int unsigned FramePrefixBytes = {p['frame_prefix_bytes']};")
    w(f"  localparam int unsigned PayloadOffset = {p['payload_offset']};")
    w(f"  localparam int unsigned ElemBytes = {p['elem_bytes']};")
    w(f"  localparam int unsigned MaxWorkers = {p['max_workers']};")
    w(f"  localparam int unsigned UdpPort = {p['udp_port']};")
    w(f"  localparam int unsigned MaxK = {max(p['k_values'])};")
    w(f"  localparam int unsigned NumKValues = {len(p['k_values'])};")
    for i, k in enumerate(p["k_values"]):  # scalars: yosys 0.23 reads no array localparams
        w(f"  localparam int unsigned KValue{i} = {k};")
    w(f"  localparam int unsigned ExpBias = {p['exp_bias']};")
    w(f"  localparam int unsigned GenWindow = {p['gen_window']};")
    w("  localparam logic [15:0] RankAll = 16'hFFFF;")
    w("")
    m = crc_beat_maps(spec)
    nb = m["nb"]
    w("  // CRC32C trailer ([crc]): little-endian, after the payload; its linear maps over one")
    w(f"  // {nb}-byte beat for rtl/core/ina_crc32c.sv. A matrix is flat, row o (the mask of input bits")
    w("  // that XOR into output bit o) at [o*W +: W]; tdata bit j is byte j/8, bit j%8.")
    w(f"  localparam int unsigned CrcBytes = {p['crc_bytes']};")
    w(f"  localparam int unsigned CrcBeatBytes = {nb};")
    w(f"  localparam int unsigned CrcStartByte = {m['start']};  // first covered byte of a frame")
    w(f"  localparam logic [31:0] CrcResidue = 32'h{spec['crc']['residue']:08X};")
    w(f"  // D: a whole beat's contribution to the register (32 rows of {8 * nb} bits).")
    w(f"  localparam logic [32*{8 * nb}-1:0] CrcBeatMat = {sv_flat(m['beat'], 8 * nb)};")
    w(f"  // A^{nb}: the register carried over a whole beat (32 rows of 32 bits).")
    w(f"  localparam logic [32*32-1:0] CrcAdvMat = {sv_flat(m['adv'], 32)};")
    w(f"  // A frame's first beat leaves CrcFirstState ^ D(beat, bytes < CrcStartByte zeroed): the")
    w(f"  // initial register carried over the {nb} - CrcStartByte bytes it covers.")
    w(f"  localparam logic [31:0] CrcFirstState = 32'h{m['first']:08X};")
    w(f"  // Entry n ([32n +: 32]) = A^n residue: a frame whose last beat holds {nb}-n bytes is good iff")
    w("  // the register after that beat taken whole equals it.")
    w(f"  localparam logic [{nb}*32-1:0] CrcResidueAt = {sv_flat(m['residue_at'], 32)};")
    w(f"  // Entry k ([1024k +: 1024]) = A^-4k, the register {nb}-4k bytes into a beat from the register")
    w("  // after the beat taken whole with those last 4k bytes zero.")
    w(f"  localparam logic [{nb // 4}*1024-1:0] CrcRewindMat = "
      f"{sv_flat([sum(r << (32 * o) for o, r in enumerate(mat)) for mat in m['rewind']], 1024)};")
    w("")
    m = crc_beat_maps(spec, icrc=True)
    ic = icrc_params(spec)
    w("  // The RoCEv2 ICRC ([roce] icrc_*: zlib's CRC-32), the same maps for ina_crc32c with Icrc = 1:")
    w("  // it covers a frame from IcrcStartByte (the IPv4 header) after 8 bytes of 0xFF; the bytes")
    w("  // of IcrcFirstZero (TOS, TTL, IP checksum, UDP checksum, BTH byte 4) are taken as all-ones,")
    w("  // which the module does by zeroing them and IcrcFirstState by including their ones.")
    w(f"  localparam int unsigned IcrcStartByte = {m['start']};")
    w(f"  localparam logic [{nb}-1:0] IcrcFirstZero = {nb}'h{m['first_zero']:0{nb // 4}X};")
    w(f"  localparam logic [31:0] IcrcResidue = 32'h{ic['residue']:08X};")
    w(f"  localparam logic [32*{8 * nb}-1:0] IcrcBeatMat = {sv_flat(m['beat'], 8 * nb)};")
    w(f"  localparam logic [32*32-1:0] IcrcAdvMat = {sv_flat(m['adv'], 32)};")
    w(f"  localparam logic [31:0] IcrcFirstState = 32'h{m['first']:08X};")
    w(f"  localparam logic [{nb}*32-1:0] IcrcResidueAt = {sv_flat(m['residue_at'], 32)};")
    w(f"  localparam logic [{nb // 4}*1024-1:0] IcrcRewindMat = "
      f"{sv_flat([sum(r << (32 * o) for o, r in enumerate(mat)) for mat in m['rewind']], 1024)};")
    w("")
    w("  // Field byte offsets within the ina header, and widths in bytes.")
    for f in spec["field"]:
        c = camel(f["name"])
        w(f"  localparam int unsigned {c}Offset = {f['offset']};")
        w(f"  localparam int unsigned {c}Bytes = {f['bytes']};")
    w("")
    w("  typedef enum logic [7:0] {")
    items = [f"    MsgType{camel(m['name'])} = 8'd{m['value']}" for m in spec["msg_type"]]
    w(",\n".join(items))
    w("  } msg_type_e;")
    w("")
    for f in spec["flag"]:
        w(f"  localparam int unsigned Flag{camel(f['name'])}Bit = {f['bit']};")
    w("")
    w("  // Security modes (the sec field) and the tag that replaces the trailer in keyed modes.")
    for m in spec["sec_mode"]:
        w(f"  localparam int unsigned SecMode{camel(m['name'])} = {m['value']};")
    w(f"  localparam int unsigned TagBytes = {spec['security']['tag_bytes']};")
    w("")
    w(f"  localparam int unsigned NumCounters = {len(spec['counter'])};")
    w("  typedef enum int unsigned {")
    items = [f"    Cnt{camel(c['name'])} = {i}" for i, c in enumerate(spec["counter"])]
    w(",\n".join(items))
    w("  } counter_e;")
    r = spec["roce"]
    w("  // RoCEv2 ([roce]).")
    for k in ("udp_port", "bth_bytes", "deth_bytes", "icrc_bytes", "opcode_ud_send_only"):
        name = "RoceOpUdSendOnly" if k == "opcode_ud_send_only" else "Roce" + camel(k)
        w(f"  localparam int unsigned {name} = {r[k]};")
    w(f"  localparam int unsigned NumRoceCounters = {len(spec['roce_counter'])};")
    w("  typedef enum int unsigned {")
    items = [f"    Cnt{camel(c['name'])} = {i}" for i, c in enumerate(spec["roce_counter"])]
    w(",\n".join(items))
    w("  } roce_counter_e;")
    w("")
    for r in spec["register"]:
        w(f"  localparam logic [11:0] Reg{camel(r['name'])}Addr = 12'h{r['addr']:03X};")
        w(f"  localparam logic [31:0] Reg{camel(r['name'])}Reset = 32'h{r['reset']:08X};")
    w("")
    w("  // Register fields: reg[<Reg><Field>Lsb +: <Reg><Field>Width].")
    for r in spec["register"]:
        for f in r.get("fields", []):
            n = f"Reg{camel(r['name'])}{camel(f['name'])}"
            w(f"  localparam int unsigned {n}Lsb = {f['lsb']};")
            w(f"  localparam int unsigned {n}Width = {f['width']};")
    w("")
    w("endpackage")
    return "\n".join(L) + "\n"


def gen_md(spec):
    p = spec["protocol"]
    L = []
    w = L.append
    w("<!-- GENERATED by proto/gen.py from proto/ina.toml. Do not edit. -->")
    w(f"Protocol version {p['version']}; ina header {p['header_bytes']} bytes after "
      f"{p['frame_prefix_bytes']} bytes of Ethernet/IPv4/UDP, payload from frame byte "
      f"{p['payload_offset']}. All fields big-endian.")
    w("")
    w("| bytes | field | meaning |")
    w("|---|---|---|")
    for f in spec["field"]:
        lo, hi = f["offset"], f["offset"] + f["bytes"] - 1
        rng = str(lo) if lo == hi else f"{lo}-{hi}"
        w(f"| {rng} | `{f['name']}` | {f['doc']} |")
    h, c = p["header_bytes"], spec["crc"]
    w(f"| {h}+4n .. {h}+4n+3 | `crc` | Trailer after the n = count payload elements: CRC32C "
      f"(poly 0x{c['poly']:08X}, reflected, init 0x{c['init']:08X}, xorout 0x{c['xorout']:08X}, "
      f"check 0x{c['check']:08X}) of bytes 0 .. {h}+4n-1, **little-endian**; every message type. |")
    t = spec["security"]["tag_bytes"]
    w(f"| {h}+4n .. {h}+4n+{t - 1} | `tag` | In place of `crc` in sec modes mac and mac_encrypt (data and "
      f"results of keyed jobs): the AES-GCM tag of bytes 0 .. {h}+4n-1 (retx cleared) under the job's "
      "traffic key, nonce rank, slot, use (docs/security.md). |")
    w("")
    for kind, title in (("msg_type", "type"), ("error_code", "error code"),
                        ("join_param", "join_param (ERROR slot)"), ("sec_mode", "sec")):
        w(f"| {title} | name | meaning |")
        w("|---|---|---|")
        for m in spec[kind]:
            w(f"| {m['value']} | `{m['name']}` | {m['doc']} |")
        w("")
    w("| flag bit | name | meaning |")
    w("|---|---|---|")
    for f in spec["flag"]:
        w(f"| {f['bit']} | `{f['name']}` | {f['doc']} |")
    w("")
    w("| counter | name | Prometheus (`ina-switchd --metrics`) | meaning |")
    w("|---|---|---|---|")
    for i, c in enumerate(spec["counter"]):
        family, reason, _ = counter_metric(spec, c)
        metric = f'{family}{{reason="{reason}"}}' if reason else family
        w(f"| {i} | `{c['name']}` | `{metric}` | {c['doc']} |")
    w("")
    w("RoCEv2 ingress counters of the hardware fabric (register map: after the counters above).")
    w("")
    w("| roce counter | name | meaning |")
    w("|---|---|---|")
    for i, c in enumerate(spec["roce_counter"]):
        w(f"| {i} | `{c['name']}` | {c['doc']} |")
    w("")
    w("| register | address | access | reset | meaning | fields |")
    w("|---|---|---|---|---|---|")
    for r in spec["register"]:
        fields = " ".join(f"{bits(f)} `{f['name']}`: {f['doc']}" for f in r.get("fields", []))
        w(f"| `{r['name']}` | 0x{r['addr']:03X} | {r['access']} | 0x{r['reset']:08X} | {r['doc']} | {fields} |")
    return "\n".join(L) + "\n"


def gen_kat(spec):
    L = ["# GENERATED by proto/gen.py: name hex-bytes(message with trailer) field=value... "
         "payload=v,v,... crc=0x... (the trailer's value)"]
    for kat in spec["kat"]:
        fields = " ".join(f"{f['name']}={kat[f['name']]}" for f in spec["field"])
        payload = ",".join(str(v) for v in kat["payload"])
        msg = encode_kat(spec, kat)
        crc = struct.unpack("<I", msg[-4:])[0]
        L.append(f"{kat['name']} {msg.hex()} {fields} payload={payload} crc=0x{crc:08x}")
    return "\n".join(L) + "\n"


def gen_sec_kat(spec):
    """Sealed messages: a [[kat]]'s header (sec set to the mode) and payload under the traffic key
    of the [[sec_kat]]'s secret, job, grant and session; data use the up key, results the down key,
    a proven JOIN the join key (session: the join_challenge's payload, nonce | salt)."""
    L = ["# GENERATED by proto/gen.py: name hex-bytes(sealed message) kat=<its [[kat]]> mode=<sec> "
         "secret=<hex> grant=<n> session=<hex> use=<n> key=<hex traffic key> dir=<up|down|join>"]
    hb = spec["protocol"]["header_bytes"]
    for sk in spec["sec_kat"]:
        kat = next(k for k in spec["kat"] if k["name"] == sk["kat"])
        kat = dict(kat, sec=sk["mode"])
        msg = encode_kat(spec, kat)[:-spec["protocol"]["crc_bytes"]]
        types = {m["name"]: m["value"] for m in spec["msg_type"]}
        direction = spec["security"]["kdf_up" if kat["type"] == types["data"] else
                                      "kdf_join" if kat["type"] == types["join"] else "kdf_down"]
        key = traffic_key(spec, bytes.fromhex(sk["secret"]), direction, kat["job"], sk["grant"],
                          bytes.fromhex(sk["session"]))
        sealed = seal(spec, msg, sk["mode"], key, sk["use"])
        assert sealed[:hb] == msg[:hb]
        L.append(f"{sk['name']} {sealed.hex()} kat={kat['name']} mode={sk['mode']} "
                 f"secret={sk['secret']} grant={sk['grant']} session={sk['session']} "
                 f"use={sk['use']} key={key.hex()} dir={direction}")
    return "\n".join(L) + "\n"


def gen_crc_kat(spec):
    """CRC32C known answers: the standard check string, RFC 3720's vectors, and pseudo-random
    buffers of every length 0..300 plus a few long ones (a fixed LCG, so the file never changes)."""
    crc = Crc(spec)
    cases = [b"123456789", bytes(32), b"\xff" * 32, bytes(range(32)), bytes(range(31, -1, -1))]
    x = 0x1234567
    for n in list(range(301)) + [1046, 1050, 4096, 4099, 9001]:
        buf = bytearray()
        for _ in range(n):
            x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            buf.append(x >> 56)
        cases.append(bytes(buf))
    L = ["# GENERATED by proto/gen.py: hex-bytes (- for none) crc32c (the CRC, as a number)"]
    for b in cases:
        L.append(f"{b.hex() or '-'} 0x{crc(b):08x}")
    return "\n".join(L) + "\n"


ROCE_HEADERS = ("bth", "deth")


def check_roce(spec):
    r = spec["roce"]
    for f in spec["roce_field"]:
        size = r[f["header"] + "_bytes"]
        if f["bytes"] not in (1, 2, 3, 4) or f["offset"] + f["bytes"] > size:
            sys.exit(f"gen.py: roce_field {f['name']} does not fit its {size}-byte {f['header']}")
        if "mask" in f and (f["bytes"] != 1 or not 0 < f["mask"] < 256):
            sys.exit(f"gen.py: roce_field {f['name']}: a mask needs a 1-byte field")
    ic = icrc_params(spec)
    crc = Crc(spec, ic)
    if crc(b"123456789") != ic["check"] or crc(b"123456789") != zlib.crc32(b"123456789"):
        sys.exit("gen.py: [roce] icrc_check does not hold (or the ICRC is not zlib's crc32)")
    for m in (b"", b"ina", bytes(range(256)) * 5):
        if crc.reg(m + crc_trailer(crc, m), crc.init) != ic["residue"]:
            sys.exit("gen.py: [roce] icrc_residue does not hold")
    # The beat maps, run as rtl/core/ina_crc32c.sv runs them (Check = 1), accept every known-answer
    # packet behind an Ethernet header and reject it with one bit flipped.
    maps = crc_beat_maps(spec, icrc=True)
    for rk in spec["roce_kat"]:
        pkt, _ = encode_roce_kat(spec, rk)
        frame = bytes(range(14)) + pkt
        bad = bytearray(frame)
        bad[len(bad) // 2] ^= 0x10
        if not beat_check(maps, frame) or beat_check(maps, bytes(bad)):
            sys.exit(f"gen.py: the ICRC beat maps disagree with zlib on {rk['name']}")


def roce_put(buf, f, value):
    """Stores value into the header bytes buf per roce_field f (big-endian, masked)."""
    if "mask" in f:
        shift = (f["mask"] & -f["mask"]).bit_length() - 1
        if value << shift & ~f["mask"]:
            sys.exit(f"gen.py: value {value} does not fit roce_field {f['name']}")
        buf[f["offset"]] = (buf[f["offset"]] & ~f["mask"]) | (value << shift)
    else:
        buf[f["offset"]:f["offset"] + f["bytes"]] = value.to_bytes(f["bytes"], "big")


def roce_icrc(ip_packet):
    """RoCEv2 ICRC of an IPv4 packet whose last 4 bytes are the ICRC: zlib's crc32 over 8 bytes
    of 0xFF, then the packet with TOS, TTL, IP checksum, UDP checksum and BTH byte 4 all-ones."""
    m = bytearray(ip_packet[:-4])
    m[1] = 0xFF
    m[8] = 0xFF
    m[10:12] = b"\xff\xff"
    m[26:28] = b"\xff\xff"
    m[28 + 4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(m))


def encode_roce_kat(spec, rk):
    r = spec["roce"]
    kats = {k["name"]: k for k in spec["kat"]}
    body = encode_kat(spec, kats[rk["kat"]])
    pad = -len(body) % 4  # the payload is padded to 4 bytes, as an RDMA NIC does
    hdr = {h: bytearray(r[h + "_bytes"]) for h in ROCE_HEADERS}
    for f in spec["roce_field"]:
        value = pad if f["name"] == "pad_count" else rk.get(f["name"])
        if value is not None:
            roce_put(hdr[f["header"]], f, value)
    udp_payload = bytes(hdr["bth"]) + bytes(hdr["deth"]) + body + b"\0" * pad
    udp_len = 8 + len(udp_payload) + r["icrc_bytes"]
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, rk["ip_id"], 0x4000, rk["ttl"], 17, 0,
                     ipaddress.IPv4Address(rk["src_ip"]).packed,
                     ipaddress.IPv4Address(rk["dst_ip"]).packed)
    csum = sum(struct.unpack(">10H", ip))
    while csum >> 16:
        csum = (csum & 0xFFFF) + (csum >> 16)
    ip = ip[:10] + struct.pack(">H", ~csum & 0xFFFF) + ip[12:]
    udp = struct.pack(">HHHH", rk["src_port"], r["udp_port"], udp_len, 0)
    pkt = ip + udp + udp_payload + b"\0\0\0\0"
    icrc = roce_icrc(pkt)
    return pkt[:-4] + struct.pack("<I", icrc), icrc


def gen_roce_cpp(spec):
    r = spec["roce"]
    L = []
    w = L.append
    w("// GENERATED by proto/gen.py from proto/ina.toml ([roce], [[roce_field]]). Do not edit.")
    w("//")
    w("// RoCEv2 header constants and big-endian field accessors. Accessors take a pointer to the")
    w("// first byte of their header (BTH: the UDP payload; DETH: 12 bytes after it); the caller")
    w("// guarantees the header's bytes are readable/writable. 3-byte fields are 24-bit numbers.")
    w("#pragma once")
    w("")
    w("#include <cstddef>")
    w("#include <cstdint>")
    w("")
    w("namespace ina::proto::roce {")
    w("")
    w(f"inline constexpr uint16_t kUdpPort = {r['udp_port']};")
    for k in ("bth", "deth", "reth", "immdt", "icrc"):
        w(f"inline constexpr size_t k{camel(k)}Bytes = {r[k + '_bytes']};")
    w(f"inline constexpr uint8_t kOpUdSendOnly = 0x{r['opcode_ud_send_only']:02X};")
    w(f"inline constexpr uint8_t kOpUdSendOnlyImm = 0x{r['opcode_ud_send_only_imm']:02X};")
    w(f"inline constexpr uint8_t kOpUcWriteOnlyImm = 0x{r['opcode_uc_write_only_imm']:02X};")
    w(f"inline constexpr uint16_t kDefaultPkey = 0x{r['default_pkey']:04X};")
    w(f"inline constexpr uint32_t kGsiQkey = 0x{r['qp1_qkey']:08X};")
    w("")
    for f in spec["roce_field"]:
        n = camel(f["header"]) + camel(f["name"])
        o = f["offset"]
        typ = CTYPE.get(f["bytes"], "uint32_t")
        w(f"// {f['doc']}")
        if "mask" in f:
            m = f["mask"]
            shift = (m & -m).bit_length() - 1
            w(f"inline constexpr uint8_t Get{n}(const uint8_t* h) {{ return (h[{o}] & 0x{m:02X}) >> {shift}; }}")
            w(f"inline constexpr void Set{n}(uint8_t* h, uint8_t v) {{")
            w(f"  h[{o}] = static_cast<uint8_t>((h[{o}] & ~0x{m:02X}) | ((v << {shift}) & 0x{m:02X}));")
            w("}")
            continue
        w(f"inline constexpr {typ} Get{n}(const uint8_t* h) {{")
        expr = " | ".join(f"({typ}{{h[{o + i}]}} << {8 * (f['bytes'] - 1 - i)})" for i in range(f["bytes"]))
        w(f"  return static_cast<{typ}>({expr});")
        w("}")
        w(f"inline constexpr void Set{n}(uint8_t* h, {typ} v) {{")
        for i in range(f["bytes"]):
            w(f"  h[{o + i}] = static_cast<uint8_t>(v >> {8 * (f['bytes'] - 1 - i)});")
        w("}")
    w("")
    w("}  // namespace ina::proto::roce")
    return "\n".join(L) + "\n"


def gen_roce_kat(spec):
    L = ["# GENERATED by proto/gen.py: name ipv4-packet-hex icrc=0x... (little-endian on the wire)"
         " field=value... kat=NAME | captured=1 for packets captured from rxe"]
    for cap in spec.get("roce_capture", []):
        pkt = bytes.fromhex(cap["hex"])
        if roce_icrc(pkt) != struct.unpack("<I", pkt[-4:])[0]:
            sys.exit(f"gen.py: roce_capture {cap['name']}: zlib ICRC does not match the captured one")
        L.append(f"{cap['name']} {pkt.hex()} icrc=0x{roce_icrc(pkt):08x} captured=1")
    for rk in spec["roce_kat"]:
        pkt, icrc = encode_roce_kat(spec, rk)
        pad = -len(encode_kat(spec, {k["name"]: k for k in spec["kat"]}[rk["kat"]])) % 4
        fields = " ".join(f"{k}={v}" for k, v in rk.items() if k not in ("name", "kat")
                          and not isinstance(v, str)) + f" pad_count={pad}"
        L.append(f"{rk['name']} {pkt.hex()} icrc=0x{icrc:08x} {fields} "
                 f"src_ip={rk['src_ip']} dst_ip={rk['dst_ip']} kat={rk['kat']}")
    return "\n".join(L) + "\n"


def lua_str(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def gen_lua(spec, body):
    """The Wireshark dissector: the spec as a Lua table, then the hand-written logic (body,
    proto/dissector.lua) that turns it into fields, a dissector and heuristics."""
    p, c = spec["protocol"], spec["crc"]
    types = {m["name"]: m["value"] for m in spec["msg_type"]}
    L = []
    w = L.append
    w("-- GENERATED by proto/gen.py from proto/ina.toml and proto/dissector.lua. Do not edit.")
    w("--")
    w(f"-- Wireshark dissector of the ina wire protocol, version {p['version']}, over UDP (port "
      f"{p['udp_port']} and")
    w("-- the ina.udp_ports preference; a heuristic elsewhere) and as the payload of RoCEv2 UD")
    w("-- SENDs (docs/dissector.md):")
    w("--   tshark -X lua_script:ina.lua -r capture.pcap -V")
    w("-- or installed into Wireshark's global Lua plugin folder (tshark -G folders).")
    w("")
    w("local spec = {")
    w(f"  version = {p['version']},")
    w(f"  udp_port = {p['udp_port']},  -- ina-switchd's default --port")
    w(f"  header_bytes = {p['header_bytes']},")
    w(f"  elem_bytes = {p['elem_bytes']},  -- payload elements: int32, big-endian")
    w(f"  crc_bytes = {p['crc_bytes']},")
    w(f"  exp_bias = {p['exp_bias']},")
    w(f"  error_type = {types['error']},")
    h = p["header_bytes"]
    w("  -- The trailer: CRC32C of every message byte before it (header, payload), little-endian.")
    w(f"  crc = {{ poly_reflected = 0x{reflect32(c['poly']):08X}, init = 0x{c['init']:08X}, "
      f"xorout = 0x{c['xorout']:08X},")
    w(f"          check = 0x{c['check']:08X},")
    doc = f"CRC32C of bytes 0 .. {h}+4*count-1 (header and payload), little-endian"
    w(f"          doc = {lua_str(doc)} }},")
    w("}")
    w("")
    w("-- Header fields in wire order (big-endian).")
    w("spec.fields = {")
    for f in spec["field"]:
        enum = ', enum = "msg_type"' if f["name"] == "type" else ""
        w(f"  {{ name = {lua_str(f['name'])}, offset = {f['offset']}, bytes = {f['bytes']}{enum},")
        w(f"    doc = {lua_str(f['doc'])} }},")
    w("}")
    w("")
    w("-- Message types whose count int32 elements follow the header; the others carry none.")
    w("spec.payload_types = { " + ", ".join(f"[{m['value']}] = true" for m in spec["msg_type"]
                                           if m.get("payload")) + " }")
    w("")
    w("spec.flags = {")
    for f in spec["flag"]:
        w(f"  {{ name = {lua_str(f['name'])}, mask = 0x{1 << f['bit']:02X}, doc = {lua_str(f['doc'])} }},")
    w("}")
    w("")
    for kind, table in (("msg_type", "msg_types"), ("error_code", "error_codes"),
                        ("join_param", "join_params")):
        w(f"spec.{table} = {{")
        for m in spec[kind]:
            w(f"  [{m['value']}] = {lua_str(m['name'])},")
        w("}")
        w("")

    def views(kind, table, comment):
        w(comment)
        w(f"spec.{table} = {{")
        for m in spec[kind]:
            if not m.get("view"):
                continue
            w(f"  [{m['value']}] = {{  -- {m['name']}")
            for v in m["view"]:
                enum = f", enum = {lua_str(v['enum'])}" if "enum" in v else ""
                w(f"    {{ field = {lua_str(v['field'])}, name = {lua_str(v['name'])}{enum},")
                w(f"      doc = {lua_str(v['doc'])} }},")
            w("  },")
        w("}")
        w("")

    views("msg_type", "views", "-- What header fields mean per message type, where it differs "
          "from the field's general meaning.")
    views("error_code", "error_views", "-- And in error messages, per error code (the aux field).")
    w("-- ---- proto/dissector.lua " + "-" * 70)
    return "\n".join(L) + "\n" + body


def write_if_changed(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], "rb") as f:
        spec = tomllib.load(f)
    check(spec)
    check_roce(spec)
    out = pathlib.Path(sys.argv[2])
    write_if_changed(out / "ina" / "proto" / "wire.h", gen_cpp(spec))
    write_if_changed(out / "ina_proto_pkg.sv", gen_sv(spec))
    write_if_changed(out / "protocol_table.md", gen_md(spec))
    write_if_changed(out / "kat.txt", gen_kat(spec))
    write_if_changed(out / "crc32c_kat.txt", gen_crc_kat(spec))
    write_if_changed(out / "ina" / "proto" / "roce_wire.h", gen_roce_cpp(spec))
    write_if_changed(out / "roce_kat.txt", gen_roce_kat(spec))
    write_if_changed(out / "sec_kat.txt", gen_sec_kat(spec))
    body = (pathlib.Path(__file__).parent / "dissector.lua").read_text()
    write_if_changed(out / "ina.lua", gen_lua(spec, body))


if __name__ == "__main__":
    main()
