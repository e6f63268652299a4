#!/usr/bin/env python3
"""Check that tshark decodes every Communication Manager MAD of RoCE v2
captures cleanly, field by field, and that the messages pair up.

Usage: cm_check.py [--expect-src IP ...] [--tshark-arg ARG ...] FILE.pcap...

Reads every UD datagram to QP 1 (the GSI) with tshark's InfiniBand
dissector (`-T fields`) and requires, for each:
- the DETH of the GSI: Q_Key 0x80010000, source QP 1 (IBA 3.5.4);
- the common MAD header (IBA 13.4.3): base version 1, management class
  0x07 (CM), class version 2, the attribute ID of a CM message (IBA 12.6);
- nothing malformed, no expert item of severity warning or above;
- the message's own fields, as tshark 4.0 names them: a REQ's local
  communication ID, service ID port and, for the RDMA IP CM service
  (IBTA annex A11: service ID 0x0000000001PPpppp), the IP CM header's
  source and destination IPv4 addresses equal to the frame's; a REP's
  local and remote communication IDs; an RTU's, a DREQ's, a DREP's
  (tshark's "drsp") and a REJ's IDs, the REJ's reason. tshark 4.0 has no
  dissector for the bodies of MRA, SIDR_REQ and SIDR_REP: their header is
  checked only.
Then the pairs (IBA 12.9): a REP's remote communication ID is the local ID
of a REQ its receiver sent to its sender, an RTU's remote ID the local ID
of a REP from its receiver, a DREP's remote ID the local ID of a DREQ from
its receiver, a REJ's remote ID (when not 0) the local ID of a REQ or REP
from its receiver.

Prints the messages per source and direction, REJ reasons, and every
problem; exits 1 on a problem, when no CM MAD is found, or when an
--expect-src address sent none.
"""
import argparse
import collections
import subprocess
import sys

GSI_QKEY = 0x80010000
NAMES = {0x10: "REQ", 0x11: "MRA", 0x12: "REJ", 0x13: "REP", 0x14: "RTU",
         0x15: "DREQ", 0x16: "DREP", 0x17: "SIDR_REQ", 0x18: "SIDR_REP"}
# tshark's expert severity "warning" (_ws.expert.severity).
SEVERITY_WARNING = 6291456
# The RDMA IP CM service IDs (annex A11): prefix 0x0000000001, then the
# port space (0x06 TCP, 0x11 UDP, 0x3F IB) and the port.
IP_CM_PREFIX = 0x0000000001

FIELDS = [
    "frame.number", "ip.src", "ip.dst", "infiniband.bth.opcode",
    "infiniband.deth.q_key", "infiniband.deth.srcqp",
    "infiniband.mad.baseversion", "infiniband.mad.mgmtclass",
    "infiniband.mad.classversion", "infiniband.mad.attributeid",
    "_ws.malformed", "_ws.expert.severity",
    # REQ
    "infiniband.cm.req", "infiniband.cm.req.serviceid.prefix",
    "infiniband.cm.req.serviceid.protocol", "infiniband.cm.req.serviceid.dport",
    "infiniband.cm.req.ip_cm.sip4", "infiniband.cm.req.ip_cm.dip4",
    # REP
    "infiniband.cm.rep", "infiniband.cm.rep.remotecommid",
    # RTU, DREQ, DREP, REJ
    "infiniband.cm.rtu.localcommid", "infiniband.cm.rtu.remotecommid",
    "infiniband.cm.dreq.localcommid", "infiniband.cm.dreq.remotecommid",
    "infiniband.cm.drsp.localcommid", "infiniband.cm.drsp.remotecommid",
    "infiniband.cm.rej.localcommid", "infiniband.cm.rej.remotecommid",
    "infiniband.cm.rej.reason",
]
# Which fields each message must have decoded.
REQUIRED = {
    "REQ": ["infiniband.cm.req", "infiniband.cm.req.serviceid.dport"],
    "REP": ["infiniband.cm.rep", "infiniband.cm.rep.remotecommid"],
    "RTU": ["infiniband.cm.rtu.localcommid", "infiniband.cm.rtu.remotecommid"],
    "DREQ": ["infiniband.cm.dreq.localcommid", "infiniband.cm.dreq.remotecommid"],
    "DREP": ["infiniband.cm.drsp.localcommid", "infiniband.cm.drsp.remotecommid"],
    "REJ": ["infiniband.cm.rej.localcommid", "infiniband.cm.rej.remotecommid",
            "infiniband.cm.rej.reason"],
}


def num(text: str):
    """A tshark field value as a number (tshark prints hex fields 0x...)."""
    try:
        return int(text, 0)
    except ValueError:
        return None


def rows(path: str, tshark_args):
    cmd = ["tshark", "-n", "-r", path, *tshark_args, "-Y", "infiniband.bth.destqp == 1",
           "-T", "fields", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        values = line.split("\t")
        values += [""] * (len(FIELDS) - len(values))
        yield dict(zip(FIELDS, values))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect-src", action="append", default=[],
                    help="fail unless this source IP sent at least one CM MAD")
    ap.add_argument("--tshark-arg", action="append", default=[],
                    help="an option for tshark (e.g. --disable-heuristic X, given as two)")
    ap.add_argument("pcaps", nargs="+")
    args = ap.parse_args()

    problems = []
    counts = collections.defaultdict(collections.Counter)  # (src, dst) -> message -> n
    rej_reasons = collections.Counter()
    sent = collections.defaultdict(set)  # (message, src, dst) -> local comm IDs
    pending = []  # (path, frame, what, message it answers, its sender, its receiver, ID)
    total = 0
    for path in args.pcaps:
        for r in rows(path, args.tshark_arg):
            total += 1
            where = f"{path} frame {r['frame.number']} ({r['ip.src']} -> {r['ip.dst']})"
            src, dst = r["ip.src"], r["ip.dst"]
            attr = num(r["infiniband.mad.attributeid"])
            name = NAMES.get(attr, f"attribute {r['infiniband.mad.attributeid'] or 'missing'}")
            counts[(src, dst)][name] += 1
            bad = []
            if num(r["infiniband.bth.opcode"]) != 0x64:
                bad.append(f"opcode {r['infiniband.bth.opcode']} (a MAD is a UD SEND_ONLY, 100)")
            if num(r["infiniband.deth.q_key"]) != GSI_QKEY or num(r["infiniband.deth.srcqp"]) != 1:
                bad.append(f"DETH Q_Key {r['infiniband.deth.q_key']} source QP "
                           f"{r['infiniband.deth.srcqp']} (the GSI's: 0x80010000, 1)")
            header = (num(r["infiniband.mad.baseversion"]), num(r["infiniband.mad.mgmtclass"]),
                      num(r["infiniband.mad.classversion"]))
            if header != (1, 0x07, 2):
                bad.append(f"MAD header base/class/version {header} (CM: 1, 7, 2)")
            if attr not in NAMES:
                bad.append(f"{name}: no CM message")
            if r["_ws.malformed"] or (num(r["_ws.expert.severity"]) or 0) >= SEVERITY_WARNING:
                bad.append(f"malformed or expert severity {r['_ws.expert.severity']}")
            for f in REQUIRED.get(name, []):
                if not r[f]:
                    bad.append(f"{name} without {f}")
            if name == "REQ" and r["infiniband.cm.req.serviceid.prefix"]:
                prefix = num("0x" + r["infiniband.cm.req.serviceid.prefix"].replace(":", ""))
                if prefix == IP_CM_PREFIX and (r["infiniband.cm.req.ip_cm.sip4"] != src
                                               or r["infiniband.cm.req.ip_cm.dip4"] != dst):
                    bad.append(f"IP CM header {r['infiniband.cm.req.ip_cm.sip4'] or '?'} -> "
                               f"{r['infiniband.cm.req.ip_cm.dip4'] or '?'} is not the frame's")
            lcid = {"REQ": "infiniband.cm.req", "REP": "infiniband.cm.rep",
                    "DREQ": "infiniband.cm.dreq.localcommid"}.get(name)
            if lcid and r[lcid]:
                sent[(name, src, dst)].add(num(r[lcid]))
            answers = {"REP": (["REQ"], "infiniband.cm.rep.remotecommid"),
                       "RTU": (["REP"], "infiniband.cm.rtu.remotecommid"),
                       "DREP": (["DREQ"], "infiniband.cm.drsp.remotecommid"),
                       "REJ": (["REQ", "REP"], "infiniband.cm.rej.remotecommid")}.get(name)
            if answers and r[answers[1]] and not (name == "REJ" and num(r[answers[1]]) == 0):
                pending.append((where, name, answers[0], dst, src, num(r[answers[1]])))
            if name == "REJ" and r["infiniband.cm.rej.reason"]:
                rej_reasons[num(r["infiniband.cm.rej.reason"])] += 1
            problems += [f"{where}: {b}" for b in bad]
    # Pairs: checked once every frame is read (a capture's order is the
    # bridge's, and both directions are in it).
    for where, name, of, sender, receiver, cid in pending:
        if not any(cid in sent[(m, sender, receiver)] for m in of):
            problems.append(f"{where}: {name} answers communication ID 0x{cid:08x}, "
                            f"which no {'/'.join(of)} from {sender} to {receiver} carried")

    print(f"CM MADs decoded by tshark: {total}")
    for (src, dst), c in sorted(counts.items()):
        shown = ", ".join(f"{m}={n}" for m, n in sorted(c.items()))
        print(f"  {src} -> {dst}: {shown}")
    if rej_reasons:
        print("  REJ reasons: " + ", ".join(f"{r}x{n}" for r, n in sorted(rej_reasons.items())))
    for p in problems[:50]:
        print(p)
    if len(problems) > 50:
        print(f"... {len(problems) - 50} more problems")
    senders = {src for (src, _dst) in counts}
    missing = [s for s in args.expect_src if s not in senders]
    if missing:
        print(f"CM check: no CM MADs from {', '.join(missing)}")
    print(f"CM check: {total} MADs, {len(problems)} problems")
    return 1 if problems or total == 0 or missing else 0


if __name__ == "__main__":
    sys.exit(main())
