#!/usr/bin/env python3
"""Check the ICRC of every RoCE v2 frame in pcap files with Scapy's
independent implementation (scapy.contrib.roce.BTH.compute_icrc).

Usage: icrc_check.py [--expect-src IP ...] FILE.pcap...

Prints one line per file and a summary (frames, per-source and per-opcode
counts, mismatches). Exits 1 on any mismatch, on an unparsable RoCE frame,
when no RoCE frame is found, or when an --expect-src address sent no frame.
"""
import argparse
import collections
import sys

from scapy.all import RawPcapReader, Ether, IP, IPv6, UDP  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

ROCE_PORT = 4791


def trim_to_ip_length(frame: bytes) -> bytes:
    """Drop Ethernet padding: keep 14 bytes + the IP datagram (the ICRC is
    the last 4 bytes of the UDP payload, not of the padded frame). Reads the
    length fields directly so each frame is dissected by Scapy only once."""
    ethertype = int.from_bytes(frame[12:14], "big")
    if ethertype == 0x0800 and len(frame) >= 18:
        return frame[: 14 + int.from_bytes(frame[16:18], "big")]
    if ethertype == 0x86DD and len(frame) >= 20:
        return frame[: 14 + 40 + int.from_bytes(frame[18:20], "big")]
    return frame


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect-src", action="append", default=[],
                    help="fail unless this source IP sent at least one frame")
    ap.add_argument("pcaps", nargs="+")
    args = ap.parse_args()

    total = bad = 0
    by_src = collections.Counter()
    by_opcode = collections.Counter()
    for path in args.pcaps:
        f_total = f_bad = 0
        # Raw bytes: each frame is dissected once, by Ether() below.
        for frame, _meta in RawPcapReader(path):
            raw = trim_to_ip_length(frame)
            eth = Ether(raw)
            if UDP not in eth or eth[UDP].dport != ROCE_PORT:
                continue
            if BTH not in eth:
                print(f"{path}: frame without BTH: {eth.summary()}")
                f_bad += 1
                continue
            carried = raw[-4:]
            computed = eth[BTH].compute_icrc(b"")
            src = eth[IP].src if IP in eth else eth[IPv6].src
            f_total += 1
            by_src[src] += 1
            by_opcode[eth[BTH].opcode] += 1
            if carried != computed:
                f_bad += 1
                print(f"{path}: ICRC MISMATCH frame #{f_total} from {src} "
                      f"opcode 0x{eth[BTH].opcode:02x} psn {eth[BTH].psn}: "
                      f"carried {carried.hex()} computed {computed.hex()}")
        print(f"{path}: {f_total} RoCE frames, {f_total - f_bad} ICRC ok, {f_bad} bad")
        total += f_total
        bad += f_bad

    print(f"ICRC (scapy.contrib.roce): {total} frames checked, {total - bad} ok, {bad} bad")
    print("  by source: " + ", ".join(f"{s}={n}" for s, n in sorted(by_src.items())))
    print("  by opcode: " + ", ".join(f"0x{o:02x}={n}" for o, n in sorted(by_opcode.items())))
    missing = [s for s in args.expect_src if by_src[s] == 0]
    if missing:
        print(f"ICRC check: no frames from {', '.join(missing)}")
    return 1 if bad or total == 0 or missing else 0


if __name__ == "__main__":
    sys.exit(main())
