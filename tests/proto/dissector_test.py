#!/usr/bin/env python3
"""Runs tshark with the generated Wireshark dissector (build/gen/ina.lua) and checks what it shows.

  dissector_test.py kat    --lua ina.lua --spec ina.toml --kat kat.txt --roce-kat roce_kat.txt
  dissector_test.py record --lua ina.lua --spec ina.toml --switchd ina-switchd --bench ina-bench

kat: every known-answer message (kat.txt) in a UDP frame to the default port: every header field,
each per-type meaning (ina.<type>.<name>) and no other, enum names, the payload values, the
trailer's value and "good"; each with one byte flipped (in the message, then in the trailer):
"bad", the computed CRC32C and the expert warning. On another port: the heuristic takes the intact
ones and leaves the damaged, until the ina.udp_ports preference names the port. Then the RoCEv2
frames of roce_kat.txt: Wireshark's BTH and DETH with the ina message inside, field by field.

record: a real ina-switchd --record capture of 2 ina-bench workers (port 0: a port nobody
registered, found by the heuristic); every frame decoded as ina, every field and payload value
equal to the capture's own bytes, every trailer good, and the message types it holds.

Exit 77 (ctest: skipped) only when tshark is missing; scripts/setup.sh installs it.
"""
import argparse
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import tomllib
import xml.etree.ElementTree as ET

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


# ---- The spec, a CRC32C of our own, pcap frames ------------------------------------------------

def crc32c(data):
    """Bitwise CRC32C (reflected 0x82F63B78, init and xorout 0xFFFFFFFF); no table, no gen.py."""
    reg = 0xFFFFFFFF
    for b in data:
        reg ^= b
        for _ in range(8):
            reg = (reg >> 1) ^ (0x82F63B78 if reg & 1 else 0)
    return reg ^ 0xFFFFFFFF


def decode_header(spec, msg):
    fmt = {1: "B", 2: "H", 4: "I"}
    return {f["name"]: struct.unpack_from(">" + fmt[f["bytes"]], msg, f["offset"])[0]
            for f in spec["field"]}


def views_of(spec, hdr):
    """{abbrev: header field} of the per-type meanings a message with this header has."""
    types = {m["value"]: m for m in spec["msg_type"]}
    codes = {m["value"]: m for m in spec["error_code"]}
    t = types.get(hdr["type"])
    if t is None:
        return {}
    out = {f"ina.{t['name']}.{v['name']}": v for v in t.get("view", [])}
    if t["name"] == "error" and hdr["aux"] in codes:
        out.update({f"ina.error.{v['name']}": v for v in codes[hdr["aux"]].get("view", [])})
    return out


def all_view_abbrevs(spec):
    out = set()
    for t in spec["msg_type"]:
        out |= {f"ina.{t['name']}.{v['name']}" for v in t.get("view", [])}
    for c in spec["error_code"]:
        out |= {f"ina.error.{v['name']}" for v in c.get("view", [])}
    return out


def udp_frame(payload, dport, sport=40000):
    eth = bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00"
    ulen = 8 + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0x4000, 64, 17, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))
    return eth + ip + struct.pack(">HHHH", sport, dport, ulen, 0) + payload


def ip_frame(ip_packet):
    return bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00" + ip_packet


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # LINKTYPE_ETHERNET
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i, 0, len(fr), len(fr)) + fr)


# ---- tshark ------------------------------------------------------------------------------------

def tshark(args, lua, pcap):
    cmd = ["tshark", "-X", f"lua_script:{lua}", "-r", pcap] + args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    # A Lua error does not fail tshark: it prints it and dissects without the script.
    errors = [l for l in r.stderr.splitlines() if "Lua" in l or "lua" in l]
    if r.returncode != 0 or errors:
        sys.exit(f"{' '.join(cmd)}: rc {r.returncode}\n{r.stderr}")
    return r.stdout


class Frame:
    """One frame of PDML: the ina fields (name -> [show, ...]), their shownames, and the names of
    everything (protocols, experts) in it."""

    def __init__(self, packet):
        self.fields, self.shownames, self.names = {}, {}, set()
        self.ina = None
        for p in packet.iter("proto"):
            self.names.add(p.get("name"))
            if p.get("name") == "ina":
                self.ina = p
        for f in packet.iter("field"):
            name = f.get("name")
            self.names.add(name)
            if self.ina is not None and name.startswith("ina."):
                self.fields.setdefault(name, []).append(f.get("show"))
                self.shownames.setdefault(name, []).append(f.get("showname"))

    def one(self, name):
        v = self.fields.get(name, [])
        return v[0] if len(v) == 1 else None


def pdml(lua, pcap, extra=()):
    root = ET.fromstring(tshark(["-T", "pdml", *extra], lua, pcap))
    frames = [Frame(p) for p in root.iter("packet")]
    for i, fr in enumerate(frames):  # a Lua error while dissecting shows in the tree, not stderr
        check("_ws.lua.error" not in fr.names, f"{pcap} frame {i + 1}: Lua error")
    return frames


# ---- kat ---------------------------------------------------------------------------------------

def read_kats(path):
    kats = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        name, hexmsg, *kv = line.split()
        values = dict(x.split("=", 1) for x in kv)
        kats.append((name, bytes.fromhex(hexmsg), values))
    return kats


def expect_message(spec, fr, msg, what, crc_expected=None):
    """fr decodes msg: every header field, the views it has and no others, enum names, payload,
    trailer (version 1: none)."""
    if fr.ina is None:
        check(False, f"{what}: not decoded as ina")
        return
    hdr = decode_header(spec, msg)
    for name, value in hdr.items():
        check(fr.one(f"ina.{name}") == (f"0x{value:02x}" if name == "flags" else str(value)),
              f"{what}: ina.{name} = {fr.fields.get('ina.' + name)}, want {value}")
    views = views_of(spec, hdr)
    for abbrev, v in views.items():
        check(fr.one(abbrev) == str(hdr[v["field"]]),
              f"{what}: {abbrev} = {fr.fields.get(abbrev)}, want {hdr[v['field']]}")
        if "enum" in v:
            names = {e["value"]: e["name"] for e in spec[v["enum"]]}
            want = f"{names.get(hdr[v['field']], 'Unknown')} ({hdr[v['field']]})"
            check(any(want in s for s in fr.shownames.get(abbrev, [])),
                  f"{what}: {abbrev} shown as {fr.shownames.get(abbrev)}, want '... {want}'")
    stray = (all_view_abbrevs(spec) - set(views)) & set(fr.fields)
    check(not stray, f"{what}: meanings of other types shown: {sorted(stray)}")
    types = {m["value"]: m["name"] for m in spec["msg_type"]}
    if hdr["type"] in types:
        want = f"Type: {types[hdr['type']]} ({hdr['type']})"
        check(fr.shownames.get("ina.type") == [want],
              f"{what}: type shown as {fr.shownames.get('ina.type')}, want {want}")
    for fl in spec["flag"]:
        want = "1" if hdr["flags"] >> fl["bit"] & 1 else "0"
        check(fr.one(f"ina.flags.{fl['name']}") == want, f"{what}: flag {fl['name']} != {want}")
    p = spec["protocol"]
    has_trailer = hdr["version"] != 1
    body = msg[:-p["crc_bytes"]] if has_trailer else msg
    values = [str(v) for v in struct.unpack(f">{(len(body) - p['header_bytes']) // 4}i",
                                            body[p["header_bytes"]:])]
    check(fr.fields.get("ina.value", []) == values,
          f"{what}: payload {fr.fields.get('ina.value')}, want {values}")
    if not has_trailer:
        check("ina.crc" not in fr.fields, f"{what}: version 1 has no trailer, one is shown")
        return
    stored = struct.unpack("<I", msg[-4:])[0]
    if crc_expected is not None:
        check(stored == crc_expected, f"{what}: test error: trailer 0x{stored:08x}")
    good = crc32c(body) == stored
    check(fr.one("ina.crc") == f"0x{stored:08x}", f"{what}: ina.crc {fr.fields.get('ina.crc')}")
    check(fr.one("ina.crc.computed") == f"0x{crc32c(body):08x}",
          f"{what}: ina.crc.computed {fr.fields.get('ina.crc.computed')}")
    check(fr.one("ina.crc.status") == ("good" if good else "bad"),
          f"{what}: ina.crc.status {fr.fields.get('ina.crc.status')}, want "
          f"{'good' if good else 'bad'}")
    check(("ina.crc.bad" in fr.names) == (not good),
          f"{what}: expert ina.crc.bad {'missing' if not good else 'on an intact message'}")


def damaged(msg, i):
    """Two copies of msg with one byte flipped: in the header or payload, and in the trailer."""
    a, b = bytearray(msg), bytearray(msg)
    a[(5 * i + 1) % (len(msg) - 4)] ^= 0xFF
    b[len(msg) - 4 + i % 4] ^= 0xFF
    return bytes(a), bytes(b)


def run_kat(args, spec, work):
    port = spec["protocol"]["udp_port"]
    kats = read_kats(args.kat)
    for name, msg, values in kats:
        check(crc32c(msg[:-4]) == int(values["crc"], 16), f"{name}: test CRC32C disagrees")
    # Intact, damaged in the message, damaged in the trailer; three frames per known answer.
    msgs = []
    for i, (name, msg, values) in enumerate(kats):
        bad_body, bad_trailer = damaged(msg, i)
        msgs += [(name, msg, int(values["crc"], 16)), (name + " (byte flipped)", bad_body, None),
                 (name + " (trailer byte flipped)", bad_trailer, None)]
    for p, how in ((port, f"the default port {port}"), (port + 1234, "another port")):
        pcap = os.path.join(work, f"kat_{p}.pcap")
        write_pcap(pcap, [udp_frame(m, p) for _, m, _ in msgs])
        frames = pdml(args.lua, pcap)
        check(len(frames) == len(msgs), f"{how}: {len(frames)} frames of {len(msgs)}")
        for (what, msg, crc), fr in zip(msgs, frames):
            # The heuristic takes this version's messages with a matching trailer, nothing else.
            if p == port or (crc is not None and msg[0] == spec["protocol"]["version"]):
                expect_message(spec, fr, msg, f"{what} on {how}", crc)
            else:
                check(fr.ina is None, f"{what} on {how}: the heuristic took it")
        if p != port:  # the preference registers the port: the damaged are shown, flagged bad
            frames = pdml(args.lua, pcap, ["-o", f"ina.udp_ports:{p}"])
            for (what, msg, crc), fr in zip(msgs, frames):
                expect_message(spec, fr, msg, f"{what} on port {p} from the preference", crc)
    print(f"kat: {len(msgs)} UDP messages ({len(kats)} known answers, each intact and damaged "
          "twice) checked on two ports")

    # RoCEv2: Wireshark's infiniband dissector (UDP port 4791) shows BTH/DETH, ina the message.
    kat_msgs = {name: msg for name, msg, _ in kats}
    roce = []
    for line in open(args.roce_kat):
        if line.startswith("#") or not line.strip():
            continue
        name, hexpkt, *kv = line.split()
        roce.append((name, bytes.fromhex(hexpkt), dict(x.split("=", 1) for x in kv)))
    pcap = os.path.join(work, "roce.pcap")
    write_pcap(pcap, [ip_frame(pkt) for _, pkt, _ in roce])
    frames = pdml(args.lua, pcap)
    r = spec["roce"]
    for (name, pkt, values), fr in zip(roce, frames):
        bth = 28  # IPv4 (20) + UDP (8)
        pad = pkt[bth + 1] >> 4 & 3
        msg = pkt[bth + r["bth_bytes"] + r["deth_bytes"]:len(pkt) - r["icrc_bytes"] - pad]
        if "kat" in values:
            check(msg == kat_msgs[values["kat"]], f"{name}: test error: not the kat's message")
        check("infiniband" in fr.names and "infiniband.bth.opcode" in fr.names
              and "infiniband.deth.srcqp" in fr.names, f"{name}: no BTH/DETH from Wireshark")
        check(fr.one("ina.pad") == (":".join(["00"] * pad) if pad else None),
              f"{name}: pad {fr.fields.get('ina.pad')}, want {pad} bytes")
        crc = int(kat_msgs[values["kat"]][-4:][::-1].hex(), 16) if "kat" in values else None
        expect_message(spec, fr, msg, f"RoCEv2 {name}", crc)
    check(len(frames) == len(roce), f"roce: {len(frames)} frames of {len(roce)}")
    print(f"kat: {len(roce)} RoCEv2 frames checked (BTH/DETH by Wireshark, the message by ina)")

    # Every message type (error: with every error code), each field a distinct value, in the
    # length its type has: every view of the spec decoded, which the known answers do not all reach.
    fmt = {1: "B", 2: "H", 4: "I"}
    every = []
    for t in spec["msg_type"]:
        for code in ([c["value"] for c in spec["error_code"]] if t["name"] == "error" else [0]):
            vals = {f["name"]: (0x0102030405 * (i + 3) + t["value"]) % (1 << 8 * f["bytes"])
                    for i, f in enumerate(spec["field"])}
            vals.update(version=spec["protocol"]["version"], type=t["value"], aux=code or 7,
                        count=3)
            msg = b"".join(struct.pack(">" + fmt[f["bytes"]], vals[f["name"]])
                           for f in spec["field"])
            if t.get("payload"):
                msg += struct.pack(">3i", -5, 0, 123456789)
            every.append(msg + struct.pack("<I", crc32c(msg)))
    pcap = os.path.join(work, "every_type.pcap")
    write_pcap(pcap, [udp_frame(m, port) for m in every])
    for m, fr in zip(every, pdml(args.lua, pcap)):
        expect_message(spec, fr, m, f"type {m[1]} aux {struct.unpack_from('>H', m, 20)[0]}",
                       struct.unpack("<I", m[-4:])[0])
        check("ina.length.bad" not in fr.names, f"type {m[1]}: length flagged, but it matches")
    print(f"kat: {len(every)} messages, one of each type and error code, checked")

    # Garbage of every short length (from 1) and a few long ones, version and type bytes mostly
    # valid, on the default port: shown without a Lua error, and every intact-looking field still decoded.
    seed = os.environ.get("INA_SEED", "1")
    seed = random.SystemRandom().randrange(1 << 31) if seed == "random" else int(seed)
    print(f"INA_SEED={seed}")
    rng = random.Random(seed)
    junk = []
    for n in list(range(1, 60)) + [1049, 1050, 1051, 8218]:  # UDP hands on no empty payload
        m = bytearray(rng.randbytes(n))
        m[:2] = bytes([rng.choice([1, 2, 7]), rng.choice([1, 2, 3, 6, 200])])[:n]
        junk.append(bytes(m))
    pcap = os.path.join(work, "junk.pcap")
    write_pcap(pcap, [udp_frame(m, port) for m in junk])
    frames = pdml(args.lua, pcap)
    h = spec["protocol"]["header_bytes"]
    for m, fr in zip(junk, frames):
        if len(m) >= h:
            hdr = decode_header(spec, m)
            check(fr.one("ina.job") == str(hdr["job"]), f"junk of {len(m)} bytes: job not decoded")
        else:
            check("ina.short" in fr.names, f"junk of {len(m)} bytes: not flagged short")
    print(f"kat: {len(junk)} malformed messages shown without a Lua error")


# ---- record ------------------------------------------------------------------------------------

def run_record(args, spec, work):
    pcap = os.path.join(work, "record.pcap")
    sw = subprocess.Popen([args.switchd, "--port", "0", "--record", pcap],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        for line in sw.stdout:
            m = re.match(r"ina-switchd listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            sys.exit("ina-switchd did not say where it listens")
        bench = subprocess.run([args.bench, "--workers", "2", "--elements", "100000", "--no-gloo",
                                "--iters", "2", "--switch", f"127.0.0.1:{port}", "--quiet"],
                               capture_output=True, text=True, timeout=120)
        if bench.returncode != 0 or '"verified": true' not in bench.stdout:
            sys.exit(f"ina-bench failed (rc {bench.returncode}):\n{bench.stdout}{bench.stderr}")
    finally:
        sw.send_signal(signal.SIGINT)
        try:
            sw.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            sw.kill()
            sys.exit("ina-switchd did not exit on SIGINT")
    print(f"record: ina-switchd on port {port} recorded {os.path.getsize(pcap)} bytes")

    # The capture's own UDP payloads, read here from the pcap.
    msgs = []
    with open(pcap, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data)[0]
    check(magic in (0xA1B2C3D4, 0xA1B23C4D), f"record: pcap magic 0x{magic:08x}")
    pos = 24
    while pos < len(data):
        _, _, incl, _ = struct.unpack_from("<IIII", data, pos)
        frame = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        ihl = (frame[14] & 0x0F) * 4
        msgs.append(frame[14 + ihl + 8:])

    names = [f"ina.{f['name']}" for f in spec["field"]]
    cols = names + ["ina.crc", "ina.crc.status", "ina.value", "_ws.col.Protocol"]
    # The switch's port named: an ephemeral port can be one Wireshark has registered for another
    # protocol (41170 is MANOLITO's), whose dissector then wins over ina's heuristic.
    out = tshark(["-o", f"ina.udp_ports:{port}", "-T", "fields", "-E", "separator=/t", "-E",
                  "occurrence=a"] + [a for c in cols for a in ("-e", c)], args.lua, pcap)
    rows = [line.split("\t") for line in out.splitlines()]
    check(len(rows) == len(msgs) and msgs, f"record: {len(rows)} decoded of {len(msgs)} frames")
    types = {m["value"]: m["name"] for m in spec["msg_type"]}
    seen = {}
    bad = 0
    for i, (msg, row) in enumerate(zip(msgs, rows)):
        got = dict(zip(cols, row))
        hdr = decode_header(spec, msg)
        want = {f"ina.{k}": str(v) for k, v in hdr.items()}
        want["ina.flags"] = f"0x{hdr['flags']:02x}"
        want["ina.crc"] = f"0x{struct.unpack('<I', msg[-4:])[0]:08x}"
        want["ina.crc.status"] = "good" if crc32c(msg[:-4]) == struct.unpack("<I", msg[-4:])[0] \
            else "bad"
        h = spec["protocol"]["header_bytes"]
        n = (len(msg) - h - 4) // 4
        want["ina.value"] = ",".join(str(v) for v in struct.unpack(f">{n}i", msg[h:h + 4 * n]))
        want["_ws.col.Protocol"] = "ina"
        diff = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
        if diff:
            bad += 1
            if bad <= 5:
                check(False, f"record frame {i + 1}: (tshark, want) {diff}")
        t = types.get(hdr["type"], hdr["type"])
        seen[t] = seen.get(t, 0) + 1
        check(want["ina.crc.status"] == "good", f"record frame {i + 1}: damaged on loopback?")
    check(bad == 0, f"record: {bad} frames decoded differently")
    for t in ("join", "data", "leave"):
        check(t in seen, f"record: no {t} message recorded")
    print(f"record: {len(msgs)} frames, every field and payload value checked; types {seen}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["kat", "record"])
    ap.add_argument("--lua", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--kat")
    ap.add_argument("--roce-kat")
    ap.add_argument("--switchd")
    ap.add_argument("--bench")
    args = ap.parse_args()
    if shutil.which("tshark") is None:
        print("SKIP: tshark not found (scripts/setup.sh installs Debian's tshark)")
        return 77
    for prog in (args.switchd, args.bench) if args.part == "record" else ():
        if not os.path.exists(prog):  # a build dir that builds only some targets (sanitizers)
            print(f"SKIP: {prog} is not built in this build directory")
            return 77
    with open(args.spec, "rb") as f:
        spec = tomllib.load(f)
    print(subprocess.run(["tshark", "--version"], capture_output=True, text=True)
          .stdout.splitlines()[0])
    with tempfile.TemporaryDirectory(prefix="ina-dissector-") as work:
        if args.part == "kat":
            run_kat(args, spec, work)
        else:
            run_record(args, spec, work)
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
