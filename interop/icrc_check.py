#!/usr/bin/env python3
"""Check the ICRC of every RoCE v2 frame in pcap files with Scapy's
independent implementation (scapy.contrib.roce.BTH.compute_icrc).

Usage: icrc_check.py [--expect-src IP ...] [--expect-ud-src IP ...]
                    [--expect-mad-src IP ...] [--max-ud-payload N] FILE.pcap...

Every opcode is checked alike: the ICRC covers the BTH, any extension
header and the payload, whatever the transport (RC, UC, UD). UD datagrams
(SEND_ONLY 0x64, SEND_ONLY_WITH_IMMEDIATE 0x65) are also read here, as
Scapy has no DETH layer: each must hold its DETH (8 bytes: Q_Key, a
reserved byte, the source QP; IBA 9.3.3), the ImmDt for 0x65, and a
payload of at most --max-ud-payload bytes (the path MTU; a datagram is one
packet).

A UD datagram to QP 1 (the GSI) is a MAD, here a Communication
Manager's: its DETH must carry the GSI's well-known Q_Key 0x80010000 and
source QP 1, its payload must be one 256-byte MAD whose common header
(IBA 13.4.3) says base version 1, class 0x07 (CM), class version 2, and an
attribute ID of a CM message (IBA 12.6: REQ 0x10 ... SIDR_REP 0x18). The
MADs are counted per source and per message.

Prints one line per file and a summary (frames, per-source, per-transport
and per-opcode counts, the UD frames with their Q_Keys and source QPs,
the CM MADs, mismatches). Exits 1 on any mismatch, on an unparsable RoCE
frame, when no RoCE frame is found, when an --expect-src address sent no
frame, when an --expect-ud-src address sent no UD frame, or when an
--expect-mad-src address sent no CM MAD.
"""
import argparse
import collections
import sys

from scapy.all import RawPcapReader, Ether, IP, IPv6, UDP  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

ROCE_PORT = 4791
BTH_LEN = 12
DETH_LEN = 8
IMMDT_LEN = 4
ICRC_LEN = 4
UD_SEND_ONLY = 0x64
UD_SEND_ONLY_WITH_IMMEDIATE = 0x65
TRANSPORTS = {0x00: "RC", 0x20: "UC", 0x40: "RD", 0x60: "UD", 0x80: "CNP"}
# The General Services Interface: QP 1 and its well-known Q_Key (IBA 3.5.4).
GSI_QPN = 1
GSI_QKEY = 0x80010000
MAD_LEN = 256
# The common MAD header (IBA 13.4.3) of a CM message (IBA 12.6).
MAD_BASE_VERSION = 1
MAD_CLASS_CM = 0x07
MAD_CM_CLASS_VERSION = 2
CM_ATTRIBUTES = {0x10: "REQ", 0x11: "MRA", 0x12: "REJ", 0x13: "REP", 0x14: "RTU",
                 0x15: "DREQ", 0x16: "DREP", 0x17: "SIDR_REQ", 0x18: "SIDR_REP",
                 0x19: "LAP", 0x1A: "APR"}


def transport(opcode: int) -> str:
    """The transport of a BTH opcode: its top three bits (IBA 9.2.1)."""
    return TRANSPORTS.get(opcode & 0xE0, f"0x{opcode & 0xE0:02x}")


def network_header(frame: bytes):
    """(EtherType, offset) of the network header, past any 802.1Q tags."""
    off = 12
    ethertype = int.from_bytes(frame[off:off + 2], "big")
    while ethertype in (0x8100, 0x88A8) and len(frame) >= off + 6:
        off += 4
        ethertype = int.from_bytes(frame[off:off + 2], "big")
    return ethertype, off + 2


def udp_payload(frame: bytes) -> bytes:
    """The UDP payload (BTH to ICRC) of a trimmed IPv4 or IPv6 frame, read
    from the header lengths."""
    ethertype, off = network_header(frame)
    if ethertype == 0x0800:
        return frame[off + (frame[off] & 0x0F) * 4 + 8:]
    return frame[off + 40 + 8:]


def check_ud(bth: bytes, opcode: int, max_payload: int):
    """A UD datagram's DETH, ImmDt and payload length, read from the raw
    bytes from the BTH to the ICRC. Returns (q_key, src_qp, payload_len)
    or a string saying what is wrong."""
    headers = BTH_LEN + DETH_LEN + (IMMDT_LEN if opcode == UD_SEND_ONLY_WITH_IMMEDIATE else 0)
    pad = (bth[1] >> 4) & 0x3
    if len(bth) < headers + ICRC_LEN:
        return f"{len(bth)} bytes from the BTH: too short for its headers and ICRC"
    deth = bth[BTH_LEN:BTH_LEN + DETH_LEN]
    q_key = int.from_bytes(deth[0:4], "big")
    src_qp = int.from_bytes(deth[5:8], "big")
    payload = len(bth) - headers - ICRC_LEN - pad
    if payload < 0:
        return f"pad count {pad} longer than the payload"
    if max_payload and payload > max_payload:
        return f"payload {payload} bytes > {max_payload} (one datagram, one packet)"
    return q_key, src_qp, payload


def check_cm_mad(bth: bytes, q_key: int, src_qp: int, payload_len: int):
    """A datagram to QP 1: its DETH and the common header of the CM MAD it
    carries (raw bytes from the BTH to the ICRC). Returns the CM message's
    name or a string saying what is wrong (prefixed "bad CM MAD: ")."""
    if q_key != GSI_QKEY or src_qp != GSI_QPN:
        return f"bad CM MAD: Q_Key 0x{q_key:08x} source QP {src_qp} (the GSI's: 0x{GSI_QKEY:08x}, {GSI_QPN})"
    if payload_len != MAD_LEN:
        return f"bad CM MAD: {payload_len} bytes (a MAD is {MAD_LEN})"
    mad = bth[BTH_LEN + DETH_LEN:BTH_LEN + DETH_LEN + MAD_LEN]
    base, mclass, cversion = mad[0], mad[1], mad[2]
    attr = int.from_bytes(mad[16:18], "big")
    if (base, mclass, cversion) != (MAD_BASE_VERSION, MAD_CLASS_CM, MAD_CM_CLASS_VERSION):
        return (f"bad CM MAD: base version {base}, class 0x{mclass:02x}, class version {cversion} "
                f"(CM: {MAD_BASE_VERSION}, 0x{MAD_CLASS_CM:02x}, {MAD_CM_CLASS_VERSION})")
    if attr not in CM_ATTRIBUTES:
        return f"bad CM MAD: attribute ID 0x{attr:04x} is no CM message"
    return CM_ATTRIBUTES[attr]


def trim_to_ip_length(frame: bytes) -> bytes:
    """Drop Ethernet padding: keep the Ethernet header (with any VLAN tags)
    + the IP datagram (the ICRC is the last 4 bytes of the UDP payload, not
    of the padded frame). Reads the length fields directly so each frame
    is dissected by Scapy only once."""
    ethertype, off = network_header(frame)
    if ethertype == 0x0800 and len(frame) >= off + 4:
        return frame[: off + int.from_bytes(frame[off + 2:off + 4], "big")]
    if ethertype == 0x86DD and len(frame) >= off + 6:
        return frame[: off + 40 + int.from_bytes(frame[off + 4:off + 6], "big")]
    return frame


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect-src", action="append", default=[],
                    help="fail unless this source IP sent at least one frame")
    ap.add_argument("--expect-ud-src", action="append", default=[],
                    help="fail unless this source IP sent at least one UD frame")
    ap.add_argument("--max-ud-payload", type=int, default=0,
                    help="fail on a UD datagram with a longer payload (0: no bound)")
    ap.add_argument("--expect-mad-src", action="append", default=[],
                    help="fail unless this source IP sent at least one CM MAD (UD to QP 1)")
    ap.add_argument("pcaps", nargs="+")
    args = ap.parse_args()

    total = bad = 0
    by_src = collections.Counter()
    by_opcode = collections.Counter()
    by_transport = collections.Counter()
    ud_by_src = collections.Counter()
    ud_qkeys = collections.defaultdict(set)
    ud_srcqps = collections.defaultdict(set)
    ud_payload = collections.defaultdict(lambda: [None, None])
    mad_by_src = collections.defaultdict(collections.Counter)
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
            op = eth[BTH].opcode
            by_opcode[op] += 1
            by_transport[transport(op)] += 1
            problems = []
            if carried != computed:
                problems.append(f"ICRC MISMATCH: carried {carried.hex()} computed {computed.hex()}")
            ud = None
            if op in (UD_SEND_ONLY, UD_SEND_ONLY_WITH_IMMEDIATE):
                ud = check_ud(udp_payload(raw), op, args.max_ud_payload)
                if isinstance(ud, str):
                    problems.append(f"bad UD datagram: {ud}")
                elif eth[BTH].dqpn == GSI_QPN:
                    mad = check_cm_mad(udp_payload(raw), *ud)
                    if mad.startswith("bad CM MAD"):
                        problems.append(mad)
                    else:
                        mad_by_src[src][mad] += 1
            elif transport(op) == "UD":
                problems.append("no UD opcode (UD has SEND_ONLY 0x64 and 0x65 only)")
            if problems:
                f_bad += 1
                print(f"{path}: frame #{f_total} from {src} opcode 0x{op:02x} "
                      f"psn {eth[BTH].psn}: " + "; ".join(problems))
            elif ud is not None:
                ud_by_src[src] += 1
                ud_qkeys[src].add(ud[0])
                ud_srcqps[src].add(ud[1])
                lo, hi = ud_payload[src]
                ud_payload[src] = [ud[2] if lo is None else min(lo, ud[2]),
                                   ud[2] if hi is None else max(hi, ud[2])]
        print(f"{path}: {f_total} RoCE frames, {f_total - f_bad} ok, {f_bad} bad")
        total += f_total
        bad += f_bad

    print(f"ICRC (scapy.contrib.roce): {total} frames checked, {total - bad} ok, {bad} bad")
    print("  by source: " + ", ".join(f"{s}={n}" for s, n in sorted(by_src.items())))
    print("  by transport: " + ", ".join(f"{t}={n}" for t, n in sorted(by_transport.items())))
    print("  by opcode: " + ", ".join(f"0x{o:02x}={n}" for o, n in sorted(by_opcode.items())))
    ud_total = sum(ud_by_src.values())
    if by_transport["UD"] or args.expect_ud_src:
        print(f"UD: {ud_total} datagrams with a good ICRC and DETH "
              f"(of {by_opcode[UD_SEND_ONLY]} SEND_ONLY 0x64, "
              f"{by_opcode[UD_SEND_ONLY_WITH_IMMEDIATE]} SEND_ONLY_WITH_IMMEDIATE 0x65)")
    for s_ip in sorted(ud_by_src):
        lo, hi = ud_payload[s_ip]
        qkeys = sorted(ud_qkeys[s_ip])
        shown = ",".join(f"0x{q:08x}" for q in qkeys[:4]) + (",..." if len(qkeys) > 4 else "")
        print(f"  from {s_ip}: {ud_by_src[s_ip]}, {len(qkeys)} Q_Key(s) {shown}, "
              f"{len(ud_srcqps[s_ip])} source QP(s), payload {lo}..{hi} bytes")
    mad_total = sum(sum(c.values()) for c in mad_by_src.values())
    if mad_total or args.expect_mad_src:
        print(f"CM MADs (UD to QP 1, Q_Key 0x{GSI_QKEY:08x}): {mad_total} with a good ICRC and header")
    for s_ip in sorted(mad_by_src):
        msgs = mad_by_src[s_ip]
        shown = ", ".join(f"{m}={msgs[m]}" for m in CM_ATTRIBUTES.values() if msgs[m])
        print(f"  from {s_ip}: {sum(msgs.values())}: {shown}")
    missing = [s for s in args.expect_src if by_src[s] == 0]
    if missing:
        print(f"ICRC check: no frames from {', '.join(missing)}")
    ud_missing = [s for s in args.expect_ud_src if ud_by_src[s] == 0]
    if ud_missing:
        print(f"ICRC check: no UD frames from {', '.join(ud_missing)}")
    mad_missing = [s for s in args.expect_mad_src if not mad_by_src[s]]
    if mad_missing:
        print(f"ICRC check: no CM MADs from {', '.join(mad_missing)}")
    return 1 if bad or total == 0 or missing or ud_missing or mad_missing else 0


if __name__ == "__main__":
    sys.exit(main())
