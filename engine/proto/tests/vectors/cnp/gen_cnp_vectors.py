#!/usr/bin/env python3
"""Expected CNP frames, built by an independent encoder: Scapy's
`scapy.contrib.roce.cnp()` (BTH opcode 0x81, BECN=1, 16 reserved zero
bytes, ICRC computed by Scapy).

Regenerate with:  python3 engine/proto/tests/vectors/cnp/gen_cnp_vectors.py \
                      > engine/proto/tests/vectors/cnp/cnp_vectors.txt
(needs `pip install scapy`; generated with Scapy 2.8.0).

Output: one vector per line, space-separated key=value fields, then
hex=<frame bytes>. The Rust test (engine/proto/tests/cc/cnp_vectors.rs) builds
the same CNP with the engine and compares bytes.
"""
from scapy.all import Ether, IP, IPv6, UDP, Dot1Q, raw
from scapy.contrib.roce import cnp

CNP_DSCP = 48  # cc::DEFAULT_CNP_DSCP; CNPs are Not-ECT (ECN bits 00)

VECTORS = [
    # name, vlan, ipver, src, dst, dscp, ttl/hlim, ident, flow_label, sport, dqpn
    ("v4_default", None, 4, "10.0.0.2", "10.0.0.1", CNP_DSCP, 64, 0, 0, 0xC001, 0x000011),
    # v4_default and v6_default are what the endpoint test produces (QP 0x11
    # of 10.0.0.2 / fd00::2 answering a CE-marked packet from QP 0x11).
    ("v4_dscp40", None, 4, "10.0.0.2", "10.0.0.1", 40, 64, 0, 0, 0xC001, 0x000011),
    ("v4_high_qpn", None, 4, "192.168.7.9", "192.168.7.10", CNP_DSCP, 64, 0x1234, 0, 0xC0FF, 0xFFFFFE),
    ("v4_dscp46_vlan", (3, 100), 4, "10.1.2.3", "10.3.2.1", 46, 255, 7, 0, 0xE000, 0x00ABCD),
    ("v6_default", None, 6, "fd00::2", "fd00::1", CNP_DSCP, 64, 0, 0, 0xC001, 0x000011),
    ("v6_flow_label", None, 6, "fd00::2", "fd00::1", CNP_DSCP, 64, 0, 0x12345, 0xC002, 0x000102),
]

SRC_MAC = "02:00:00:00:00:02"
DST_MAC = "02:00:00:00:00:01"


def build(vlan, ipver, src, dst, dscp, ttl, ident, flow, sport, dqpn):
    eth = Ether(src=SRC_MAC, dst=DST_MAC)
    if vlan is not None:
        eth = eth / Dot1Q(prio=vlan[0], vlan=vlan[1])
    tos = dscp << 2  # ECN = 00, Not-ECT
    if ipver == 4:
        ip = IP(src=src, dst=dst, tos=tos, ttl=ttl, id=ident, flags="DF")
        udp = UDP(sport=sport, dport=4791, chksum=0)  # zero UDP checksum over IPv4
    else:
        ip = IPv6(src=src, dst=dst, tc=tos, hlim=ttl, fl=flow)
        udp = UDP(sport=sport, dport=4791)  # Scapy computes the IPv6 UDP checksum
    return raw(eth / ip / udp / cnp(dqpn))


for name, vlan, ipver, src, dst, dscp, ttl, ident, flow, sport, dqpn in VECTORS:
    frame = build(vlan, ipver, src, dst, dscp, ttl, ident, flow, sport, dqpn)
    vlan_s = "none" if vlan is None else f"{vlan[0]}:{vlan[1]}"
    print(
        f"name={name} vlan={vlan_s} ip={ipver} src={src} dst={dst} dscp={dscp} "
        f"ttl={ttl} ident={ident} flow={flow} sport={sport} dqpn={dqpn} "
        f"smac={SRC_MAC} dmac={DST_MAC} hex={frame.hex()}"
    )
