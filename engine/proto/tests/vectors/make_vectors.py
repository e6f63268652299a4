#!/usr/bin/env python3
"""Generate RoCE v2 test vectors with an independent implementation (Scapy).

Writes, next to this script:
  roce_vectors.pcap   classic pcap (Ethernet), one frame per case
  roce_vectors.json   manifest: the expected field values of every frame

Scapy's `scapy.contrib.roce` provides BTH (with its ICRC computation), AETH
and the CNP; the other extension headers (RETH, ImmDt, IETH, AtomicETH,
AtomicAckETH) are appended as raw big-endian bytes *after* the BTH, so Scapy
still computes the ICRC over them. The engine's own encoder is never used
here. After writing the pcap the script runs `tshark -V` (if installed) and
records, per frame, whether Wireshark decoded it as InfiniBand and whether it
raised any malformed/expert warning.

Usage: python3 make_vectors.py   (needs `pip install scapy`; tshark optional)
"""

import json
import os
import shutil
import struct
import subprocess
import sys

from scapy.all import Ether, Dot1Q, IP, IPv6, UDP, Raw, ARP, wrpcap
from scapy.contrib.roce import BTH, AETH, cnp

HERE = os.path.dirname(os.path.abspath(__file__))
PCAP = os.path.join(HERE, "roce_vectors.pcap")
MANIFEST = os.path.join(HERE, "roce_vectors.json")

NAMES = {
    0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST",
    0x03: "SEND_LAST_WITH_IMMEDIATE", 0x04: "SEND_ONLY",
    0x05: "SEND_ONLY_WITH_IMMEDIATE", 0x06: "RDMA_WRITE_FIRST",
    0x07: "RDMA_WRITE_MIDDLE", 0x08: "RDMA_WRITE_LAST",
    0x09: "RDMA_WRITE_LAST_WITH_IMMEDIATE", 0x0A: "RDMA_WRITE_ONLY",
    0x0B: "RDMA_WRITE_ONLY_WITH_IMMEDIATE", 0x0C: "RDMA_READ_REQUEST",
    0x0D: "RDMA_READ_RESPONSE_FIRST", 0x0E: "RDMA_READ_RESPONSE_MIDDLE",
    0x0F: "RDMA_READ_RESPONSE_LAST", 0x10: "RDMA_READ_RESPONSE_ONLY",
    0x11: "ACKNOWLEDGE", 0x12: "ATOMIC_ACKNOWLEDGE", 0x13: "COMPARE_SWAP",
    0x14: "FETCH_ADD", 0x16: "SEND_LAST_WITH_INVALIDATE",
    0x17: "SEND_ONLY_WITH_INVALIDATE", 0x81: "CNP",
}
RETH = {0x06, 0x0A, 0x0B, 0x0C}
IMMDT = {0x03, 0x05, 0x09, 0x0B}
IETH = {0x16, 0x17}
AETH_OPS = {0x0D, 0x0F, 0x10, 0x11, 0x12}
ATOMIC = {0x13, 0x14}
ATOMIC_ACK = {0x12}
NO_PAYLOAD = {0x0C, 0x11, 0x12, 0x13, 0x14}
FIRST_MIDDLE = {0x00, 0x01, 0x06, 0x07, 0x0D, 0x0E}
PMTU = 256
ECNS = [0b10, 0b11, 0b01, 0b00]  # ECT(0), CE, ECT(1), Not-ECT

SRC_MAC, DST_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
V4 = ("192.168.7.1", "192.168.7.2")
V6 = ("fd00:7::1", "fd00:7::2")


def payload_bytes(n, seed):
    return bytes(((i * 7 + seed * 13 + 1) & 0xFF) for i in range(n))


def build(case):
    """Build one frame from a case dict; return (scapy packet, manifest entry)."""
    op = case["opcode"]
    seed = case["seed"]
    ecn = ECNS[seed % 4]
    dscp = 26 if op != 0x81 else 48
    if op == 0x81:
        ecn = 0  # CNPs are not ECN-capable (docs/congestion.md, "CNP")
    vlan = case["vlan"]
    l2 = Ether(src=SRC_MAC, dst=DST_MAC)
    if vlan:
        l2 = l2 / Dot1Q(prio=vlan["pcp"], id=int(vlan["dei"]), vlan=vlan["vid"])
    sport = 0xC000 + seed
    if case["ip"] == 4:
        ttl = 64 - (seed % 5)
        ident = 0x1000 + seed
        df = seed % 2 == 0
        l3 = IP(src=V4[0], dst=V4[1], tos=(dscp << 2) | ecn, ttl=ttl, id=ident,
                flags="DF" if df else 0)
        l4 = UDP(sport=sport, dport=4791, chksum=0)  # rxe sends 0 over IPv4
        ipf = {"ip_version": 4, "src": V4[0], "dst": V4[1], "ttl": ttl,
               "ident": ident, "dont_fragment": df}
    else:
        hop = 64 - (seed % 5)
        flow = (0x12345 + seed * 977) & 0xFFFFF
        l3 = IPv6(src=V6[0], dst=V6[1], tc=(dscp << 2) | ecn, fl=flow, hlim=hop)
        l4 = UDP(sport=sport, dport=4791)  # Scapy computes the checksum
        ipf = {"ip_version": 6, "src": V6[0], "dst": V6[1], "hop_limit": hop,
               "flow_label": flow}

    dqpn = (0x000011 + seed * 0x010203) & 0xFFFFFF
    psn = (0xFFFFF0 + seed * 3) & 0xFFFFFF
    ack_req = op not in (0x81,) and (seed % 3 != 1)
    solicited = op != 0x81 and seed % 4 == 3
    mig_req = op != 0x81 and seed % 2 == 1
    pkey = 0xFFFF if seed % 5 else 0x8001
    fecn = op != 0x81 and seed % 7 == 3

    if op == 0x81:
        payload_len, pad = 16, 0
    elif op in NO_PAYLOAD:
        payload_len, pad = 0, 0
    elif op in FIRST_MIDDLE:
        payload_len, pad = PMTU, 0
    else:
        want_pad = case["pad"]
        payload_len = 20 + seed % 3 * 8 + ((4 - want_pad) % 4)
        pad = (4 - payload_len % 4) % 4
        assert pad == want_pad
    data = payload_bytes(payload_len, seed) if op != 0x81 else b"\0" * 16

    entry = {
        "roce": True, "opcode": op, "opcode_name": NAMES[op],
        "vlan": vlan, "dscp": dscp, "ecn": ecn, **ipf,
        "udp_sport": sport, "udp_dport": 4791,
        "solicited": solicited, "mig_req": mig_req, "pad": pad, "pkey": pkey,
        "fecn": fecn, "becn": op == 0x81, "dqpn": dqpn, "ack_req": ack_req,
        "psn": psn if op != 0x81 else 0,
        "reth": None, "aeth": None, "atomic_eth": None, "atomic_ack_eth": None,
        "immdt": None, "ieth": None,
        "payload_len": payload_len, "payload_hex": data.hex(),
    }
    if op == 0x81:
        bth = cnp(dqpn)
        bth.pkey = pkey
    else:
        bth = BTH(opcode=op, solicited=int(solicited), migreq=int(mig_req),
                  padcount=pad, pkey=pkey, fecn=int(fecn), becn=0, dqpn=dqpn,
                  ackreq=int(ack_req), psn=psn)
    ext = b""
    if op in RETH:
        va, rkey, ln = 0x00007F00_00000000 + seed * 0x1000, 0x1000 + seed, 4096 + seed
        ext += struct.pack("!QII", va, rkey, ln)
        entry["reth"] = {"va": va, "rkey": rkey, "len": ln}
    if op in ATOMIC:
        va, rkey = 0x00007F00_00010000 + seed * 8, 0x2000 + seed
        swap, cmp_ = 0xDEADBEEF_00000000 + seed, 0x01234567_89ABCDEF
        ext += struct.pack("!QIQQ", va, rkey, swap, cmp_)
        entry["atomic_eth"] = {"va": va, "rkey": rkey, "swap_add": swap, "compare": cmp_}
    if op in IMMDT:
        imm = 0xA5A50000 + seed
        ext += struct.pack("!I", imm)
        entry["immdt"] = imm
    if op in IETH:
        rkey = 0x3000 + seed
        ext += struct.pack("!I", rkey)
        entry["ieth"] = rkey
    stack = bth
    if op in AETH_OPS:
        # ACK with credits, RNR NAK, NAK PSN seq error, ... in rotation.
        syndrome = [0x1F, 0x00, 0x2E, 0x60, 0x62, 0x0A][seed % 6]
        if op != 0x11:
            syndrome = 0x1F
        msn = (0x00ABCD + seed) & 0xFFFFFF
        stack = stack / AETH(syndrome=syndrome, msn=msn)
        entry["aeth"] = {"syndrome": syndrome, "msn": msn}
        if op in ATOMIC_ACK:
            orig = 0x0000_0000_0000_002A + seed
            ext += struct.pack("!Q", orig)
            entry["atomic_ack_eth"] = {"orig": orig}
    body = ext + (data + b"\0" * pad if op != 0x81 else b"")
    if body:
        stack = stack / Raw(body)
    pkt = l2 / l3 / l4 / stack
    return pkt, entry


def main():
    cases = []
    seed = 0
    for op in sorted(NAMES):
        for ip in (4, 6):
            for vlan in (None, {"pcp": 3, "dei": False, "vid": 100}):
                cases.append({"opcode": op, "ip": ip, "vlan": vlan,
                              "pad": seed % 4, "seed": seed})
                seed += 1
    # Every pad count over both IP versions for one LAST and one ONLY opcode.
    for op in (0x02, 0x04, 0x0A, 0x10):
        for pad in range(4):
            cases.append({"opcode": op, "ip": 4 if pad % 2 else 6,
                          "vlan": {"pcp": 7, "dei": True, "vid": 4094} if pad == 3 else None,
                          "pad": pad, "seed": seed})
            seed += 1

    frames, manifest = [], []
    for case in cases:
        pkt, entry = build(case)
        raw = bytes(pkt)
        entry["icrc"] = struct.unpack("<I", raw[-4:])[0]
        entry["expect"] = "ok"
        frames.append(raw)
        manifest.append(entry)

    # Corrupted ICRCs: copies of valid frames with the trailer or a payload
    # byte changed.
    for idx, how in ((4, "trailer"), (33, "trailer"), (58, "payload"),
                     (71, "trailer"), (90, "payload"), (95, "header")):
        raw = bytearray(frames[idx])
        entry = dict(manifest[idx])
        if how == "trailer":
            raw[-1] ^= 0x5A
            entry["icrc"] = struct.unpack("<I", bytes(raw[-4:]))[0]
        elif how == "payload":
            raw[-5] ^= 0x01  # last pad/payload byte before the ICRC
            if entry["payload_len"] and entry["pad"] == 0:
                p = bytearray.fromhex(entry["payload_hex"])
                p[-1] ^= 0x01
                entry["payload_hex"] = p.hex()
        else:
            # BTH P_Key (an invariant field) changed.
            bth = 14 + (4 if entry["vlan"] else 0) + (20 if entry["ip_version"] == 4 else 40) + 8
            raw[bth + 3] ^= 0x01
            entry["pkey"] ^= 0x01
        entry["expect"] = "bad_icrc"
        entry["corruption"] = how
        frames.append(bytes(raw))
        manifest.append(entry)

    # Frames that are not RoCE v2, for the decoder's skip count.
    frames.append(bytes(Ether(src=SRC_MAC, dst="ff:ff:ff:ff:ff:ff") /
                        ARP(psrc=V4[0], pdst=V4[1])))
    manifest.append({"roce": False, "expect": "not_roce", "what": "ARP"})
    frames.append(bytes(Ether(src=SRC_MAC, dst=DST_MAC) / IP(src=V4[0], dst=V4[1]) /
                        UDP(sport=40000, dport=40001) / Raw(b"not roce")))
    manifest.append({"roce": False, "expect": "not_roce", "what": "UDP 40001"})

    for i, entry in enumerate(manifest):
        entry["frame"] = i + 1
    pkts = []
    for i, f in enumerate(frames):
        pkt = Ether(f)
        pkt.time = 1_764_000_000 + i / 1000  # fixed: the pcap is reproducible
        pkts.append(pkt)
    wrpcap(PCAP, pkts, linktype=1)
    tshark_check(manifest)
    with open(MANIFEST, "w") as fh:
        json.dump({"generator": "scapy " + __import__("scapy").__version__,
                   "pmtu": PMTU, "frames": manifest}, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(f"wrote {len(frames)} frames to {PCAP} and {MANIFEST}")


def tshark_check(manifest):
    """Record Wireshark's verdict on every frame (InfiniBand decode, expert
    info) in the manifest; fail loudly on malformed RoCE frames."""
    tshark = shutil.which("tshark")
    if not tshark:
        print("tshark not installed: manifest has no tshark verdicts", file=sys.stderr)
        return
    out = subprocess.run(
        [tshark, "-r", PCAP, "-T", "fields", "-E", "separator=|",
         "-e", "frame.number", "-e", "frame.protocols", "-e", "infiniband.bth.opcode",
         "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn",
         "-e", "_ws.expert.severity", "-e", "_ws.malformed"],
        check=True, capture_output=True, text=True).stdout
    version = subprocess.run([tshark, "--version"], capture_output=True,
                             text=True).stdout.splitlines()[0]
    bad = []
    for line in out.splitlines():
        num, protos, opcode, dqpn, psn, expert, malformed = line.split("|")
        entry = manifest[int(num) - 1]
        verdict = {
            "infiniband": "infiniband" in protos.split(":"),
            "protocols": protos,
            "expert": expert,
            "malformed": bool(malformed),
            "version": version,
        }
        if entry["roce"]:
            verdict["opcode"] = int(opcode, 0) if opcode else None
            verdict["dqpn"] = int(dqpn, 0) if dqpn else None
            verdict["psn"] = int(psn, 0) if psn else None
            if (not verdict["infiniband"] or verdict["malformed"] or expert
                    or verdict["opcode"] != entry["opcode"]
                    or verdict["dqpn"] != entry["dqpn"]
                    or verdict["psn"] != entry["psn"]):
                bad.append((num, verdict))
        entry["tshark"] = verdict
    if bad:
        for num, verdict in bad:
            print(f"tshark disagrees on frame {num}: {verdict}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
