#!/usr/bin/env python3
"""UD (Unreliable Datagram) RoCE v2 test vectors made by Scapy.

Writes, next to this script:
  ud_vectors.pcap   classic pcap (Ethernet), one UD datagram per frame
  ud_vectors.json   the expected field values of every frame

Scapy's `scapy.contrib.roce.BTH` builds the BTH and computes the ICRC; the
DETH (Q_Key 4 bytes, a reserved zero byte, source QP 3 bytes; IBA 9.3.3)
and, for SEND_ONLY_WITH_IMMEDIATE, the ImmDt are appended as raw
big-endian bytes after the BTH, so Scapy's ICRC covers them. The fields
are those rxe's requester sends for UD (`init_req_packet`): P_Key 0xFFFF,
AckReq clear, UDP checksum 0 over IPv4. The engine's encoder is never
used here. The frames are the same each run (fixed timestamps).

Usage: python3 make_ud_vectors.py   (needs `pip install scapy`)
"""

import json
import os
import struct

from scapy.all import Ether, Dot1Q, IP, IPv6, UDP, Raw, wrpcap
from scapy.contrib.roce import BTH

HERE = os.path.dirname(os.path.abspath(__file__))
PCAP = os.path.join(HERE, "ud_vectors.pcap")
MANIFEST = os.path.join(HERE, "ud_vectors.json")

SRC_MAC, DST_MAC = "02:00:00:00:0a:01", "02:00:00:00:0a:02"
V4 = ("10.20.0.1", "10.20.0.2")
V6 = ("fd00:20::1", "fd00:20::2")
LENS = [0, 1, 2, 3, 4, 61, 256, 1024]


def build(seed, op, ip, vlan, length):
    l2 = Ether(src=SRC_MAC, dst=DST_MAC)
    if vlan:
        l2 = l2 / Dot1Q(prio=5, id=0, vlan=42)
    sport = 0xC100 + seed
    tc = (26 << 2) | (seed % 4)
    if ip == 4:
        l3 = IP(src=V4[0], dst=V4[1], tos=tc, ttl=64, id=0, flags="DF")
        l4 = UDP(sport=sport, dport=4791, chksum=0)
    else:
        l3 = IPv6(src=V6[0], dst=V6[1], tc=tc, fl=(seed * 4099) & 0xFFFFF, hlim=64)
        l4 = UDP(sport=sport, dport=4791)
    dqpn = (0x000100 + seed * 0x010101) & 0xFFFFFF
    psn = (0xFFFFF8 + seed) & 0xFFFFFF
    qkey = 0x80010000 if seed % 5 == 0 else 0x11110000 + seed
    sqpn = (0x000011 + seed * 0x000203) & 0xFFFFFF
    solicited = seed % 3 == 0
    pad = (4 - length % 4) % 4
    data = bytes(((i * 11 + seed * 7 + 3) & 0xFF) for i in range(length))
    bth = BTH(opcode=op, solicited=int(solicited), migreq=0, padcount=pad,
              pkey=0xFFFF, fecn=0, becn=0, dqpn=dqpn, ackreq=0, psn=psn)
    ext = struct.pack("!I", qkey) + struct.pack("!I", sqpn)  # reserved byte 0
    imm = None
    if op == 0x65:
        imm = 0xD0D00000 + seed
        ext += struct.pack("!I", imm)
    pkt = l2 / l3 / l4 / bth / Raw(ext + data + b"\0" * pad)
    entry = {
        "opcode": op, "ip_version": ip, "vlan": vlan, "dqpn": dqpn, "psn": psn,
        "solicited": solicited, "pad": pad, "qkey": qkey, "src_qp": sqpn,
        "immdt": imm, "payload_hex": data.hex(), "udp_sport": sport,
        "src": (V4 if ip == 4 else V6)[0], "dst": (V4 if ip == 4 else V6)[1],
    }
    return pkt, entry


def main():
    frames, manifest = [], []
    seed = 0
    for op in (0x64, 0x65):
        for ip in (4, 6):
            for vlan in (False, True):
                for length in LENS:
                    pkt, entry = build(seed, op, ip, vlan, length)
                    raw = bytes(pkt)
                    entry["icrc"] = struct.unpack("<I", raw[-4:])[0]
                    frames.append(raw)
                    manifest.append(entry)
                    seed += 1
    pkts = [Ether(f) for f in frames]
    for i, p in enumerate(pkts):
        p.time = 1_700_000_000 + i
    wrpcap(PCAP, pkts)
    with open(MANIFEST, "w") as f:
        json.dump({"generator": "make_ud_vectors.py (Scapy)", "frames": manifest}, f, indent=1)
        f.write("\n")
    print(f"{len(frames)} frames -> {PCAP}")


if __name__ == "__main__":
    main()
