//! A checked, borrowed view of one RoCE v2 frame: the validator in
//! [`super::parse`] checks every length and field rule once, then the
//! headers are read lazily from the frame bytes by accessors (no copy of
//! the headers into a [`RoceHeaders`], no copy of the payload). The
//! receive path uses this; [`RoceFrameView::headers`] /
//! [`RoceFrameView::to_frame`] materialise the owned representations for
//! callers that want them.
//!
//! Layout: `docs/wire-format.md`, "Frame layout" (header order and sizes),
//! "BTH", "RC opcodes" (extension headers per opcode, their order),
//! "ICRC".

use core::net::{Ipv4Addr, Ipv6Addr};

use super::aeth::{Aeth, AethRepr};
use super::atomic::{AtomicAckEth, AtomicAckEthRepr, AtomicEth, AtomicEthRepr};
use super::bth::{self, Bth, BthRepr};
use super::bytes::{get16, get32};
use super::deth::{Deth, DethRepr};
use super::eth::{self, EthRepr, EthernetFrame};
use super::frame::{RoceFrame, RoceHeaders};
use super::icrc::{self, IpVersion, ICRC_LEN};
use super::ip::Ecn;
use super::ipv4::{self, Ipv4Packet};
use super::ipv6::{self, Ipv6Packet};
use super::opcode::Opcode;
use super::reth::{Reth, RethRepr};
use super::udp::{self, UdpPacket, UdpRepr};
use super::vlan::VlanHeader;

/// A validated RoCE v2 frame, borrowed. Small and `Copy` (the frame slice
/// plus a few offsets); header fields are read from the bytes on demand.
///
/// Only the frame validator (behind [`super::parse_frame_view`]) makes
/// one: every offset was checked against the frame there, so the
/// accessors cannot go out of bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceFrameView<'a> {
    pub(super) frame: &'a [u8],
    pub(super) opcode: Opcode,
    pub(super) version: IpVersion,
    /// Offset of the IP header (14, or 18 behind an 802.1Q tag).
    pub(super) ip: u8,
    /// Offset of the payload (after the extension headers).
    pub(super) payload: u16,
    /// Payload bytes, without pad.
    pub(super) payload_len: u32,
    /// Offset of the ICRC; the IP packet ends 4 bytes later.
    pub(super) icrc: u32,
}

impl<'a> RoceFrameView<'a> {
    /// The whole frame as received.
    #[inline]
    pub fn frame(&self) -> &'a [u8] {
        self.frame
    }

    /// The BTH opcode.
    #[inline(always)]
    pub fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// IPv4 or IPv6.
    #[inline]
    pub fn ip_version(&self) -> IpVersion {
        self.version
    }

    #[inline(always)]
    fn ip_at(&self) -> usize {
        self.ip as usize
    }

    /// Offset of the UDP header.
    #[inline(always)]
    fn udp_at(&self) -> usize {
        let ip_len = match self.version {
            IpVersion::V4 => ipv4::HEADER_LEN,
            IpVersion::V6 => ipv6::HEADER_LEN,
        };
        self.ip_at() + ip_len
    }

    #[inline(always)]
    fn bth_at(&self) -> usize {
        self.udp_at() + udp::HEADER_LEN
    }

    /// Offset of the first extension header.
    #[inline(always)]
    fn ext_at(&self) -> usize {
        self.bth_at() + bth::HEADER_LEN
    }

    /// The BTH bytes as a view.
    #[inline(always)]
    pub fn bth(&self) -> Bth<&'a [u8]> {
        let at = self.bth_at();
        Bth::new_unchecked(&self.frame[at..at + bth::HEADER_LEN])
    }

    /// BTH PSN (24 bits).
    #[inline(always)]
    pub fn psn(&self) -> u32 {
        self.bth().psn()
    }

    /// BTH destination QP (24 bits).
    #[inline(always)]
    pub fn dest_qp(&self) -> u32 {
        self.bth().dest_qp()
    }

    /// BTH partition key.
    #[inline(always)]
    pub fn pkey(&self) -> u16 {
        self.bth().pkey()
    }

    /// UDP source port (the sender's flow entropy; RoCE's destination port
    /// is always 4791).
    #[inline(always)]
    pub fn udp_src_port(&self) -> u16 {
        get16(self.frame, self.udp_at())
    }

    /// BTH AckReq.
    #[inline(always)]
    pub fn ack_req(&self) -> bool {
        self.bth().ack_req()
    }

    /// BTH pad count.
    #[inline]
    pub fn pad_count(&self) -> u8 {
        self.bth().pad_count()
    }

    /// The IP ECN codepoint (low two bits of the IPv4 TOS / IPv6 traffic
    /// class).
    #[inline(always)]
    pub fn ecn(&self) -> Ecn {
        let at = self.ip_at();
        match self.version {
            IpVersion::V4 => Ecn::from_bits(self.frame[at + 1]),
            // Traffic class = low nibble of byte 0, high nibble of byte 1.
            IpVersion::V6 => Ecn::from_bits(self.frame[at + 1] >> 4),
        }
    }

    /// The IP header as received: 20 bytes (IPv4, no options) or 40
    /// (IPv6). What a UD receive places in its buffer's GRH area.
    #[inline]
    pub fn ip_header(&self) -> &'a [u8] {
        let len = match self.version {
            IpVersion::V4 => ipv4::HEADER_LEN,
            IpVersion::V6 => ipv6::HEADER_LEN,
        };
        &self.frame[self.ip_at()..self.ip_at() + len]
    }

    /// The Ethernet source address.
    #[inline]
    pub fn src_mac(&self) -> [u8; 6] {
        EthernetFrame::new_unchecked(self.frame).src_addr()
    }

    /// Source and destination addresses of an IPv4 frame.
    #[inline(always)]
    pub fn ipv4_addrs(&self) -> Option<(Ipv4Addr, Ipv4Addr)> {
        match self.version {
            IpVersion::V4 => {
                let at = self.ip_at();
                Some((
                    Ipv4Addr::from_bits(get32(self.frame, at + 12)),
                    Ipv4Addr::from_bits(get32(self.frame, at + 16)),
                ))
            }
            IpVersion::V6 => None,
        }
    }

    /// Source and destination addresses of an IPv6 frame.
    #[inline(always)]
    pub fn ipv6_addrs(&self) -> Option<(Ipv6Addr, Ipv6Addr)> {
        match self.version {
            IpVersion::V6 => {
                let p = Ipv6Packet::new_unchecked(&self.frame[self.ip_at()..]);
                Some((p.src_addr(), p.dst_addr()))
            }
            IpVersion::V4 => None,
        }
    }

    /// DETH (the UD opcodes); first extension header (IBA 9.3.3).
    #[inline]
    pub fn deth(&self) -> Option<DethRepr> {
        if !self.opcode.has_deth() {
            return None;
        }
        let at = self.ext_at();
        Some(DethRepr::parse(&Deth::new_unchecked(
            &self.frame[at..at + Deth::<&[u8]>::HEADER_LEN],
        )))
    }

    /// Offset of the RETH: after a DETH (never both).
    #[inline(always)]
    fn reth_at(&self) -> usize {
        self.ext_at() + if self.opcode.has_deth() { 8 } else { 0 }
    }

    /// RETH (WRITE FIRST / ONLY, READ request); first extension header.
    #[inline(always)]
    pub fn reth(&self) -> Option<RethRepr> {
        if !self.opcode.has_reth() {
            return None;
        }
        let at = self.reth_at();
        Some(RethRepr::parse(&Reth::new_unchecked(
            &self.frame[at..at + Reth::<&[u8]>::HEADER_LEN],
        )))
    }

    /// Offset of the AtomicETH: after a RETH (never both in RC).
    #[inline(always)]
    fn atomic_eth_at(&self) -> usize {
        self.reth_at() + if self.opcode.has_reth() { 16 } else { 0 }
    }

    /// Offset of the ImmDt / IETH: after RETH and AtomicETH.
    #[inline(always)]
    fn imm_at(&self) -> usize {
        self.atomic_eth_at() + if self.opcode.has_atomic_eth() { 28 } else { 0 }
    }

    /// Offset of the AETH: after the request headers.
    #[inline(always)]
    fn aeth_at(&self) -> usize {
        let imm = self.opcode.has_immdt() || self.opcode.has_ieth();
        self.imm_at() + if imm { 4 } else { 0 }
    }

    /// AtomicETH (compare-and-swap, fetch-and-add).
    #[inline]
    pub fn atomic_eth(&self) -> Option<AtomicEthRepr> {
        if !self.opcode.has_atomic_eth() {
            return None;
        }
        let at = self.atomic_eth_at();
        Some(AtomicEthRepr::parse(&AtomicEth::new_unchecked(
            &self.frame[at..at + AtomicEth::<&[u8]>::HEADER_LEN],
        )))
    }

    /// ImmDt (immediate data) of the *_IMM opcodes.
    #[inline]
    pub fn immdt(&self) -> Option<u32> {
        if !self.opcode.has_immdt() {
            return None;
        }
        Some(get32(self.frame, self.imm_at()))
    }

    /// IETH (R_Key to invalidate) of SEND_*_WITH_INV.
    #[inline]
    pub fn ieth(&self) -> Option<u32> {
        if !self.opcode.has_ieth() {
            return None;
        }
        Some(get32(self.frame, self.imm_at()))
    }

    /// AETH (ACK, READ response FIRST/LAST/ONLY, atomic ACK).
    #[inline]
    pub fn aeth(&self) -> Option<AethRepr> {
        if !self.opcode.has_aeth() {
            return None;
        }
        let at = self.aeth_at();
        Some(AethRepr::parse(&Aeth::new_unchecked(
            &self.frame[at..at + Aeth::<&[u8]>::HEADER_LEN],
        )))
    }

    /// AtomicAckETH (atomic ACK), after the AETH.
    #[inline]
    pub fn atomic_ack_eth(&self) -> Option<AtomicAckEthRepr> {
        if !self.opcode.has_atomic_ack_eth() {
            return None;
        }
        let at = self.aeth_at() + Aeth::<&[u8]>::HEADER_LEN;
        Some(AtomicAckEthRepr::parse(&AtomicAckEth::new_unchecked(
            &self.frame[at..at + AtomicAckEth::<&[u8]>::HEADER_LEN],
        )))
    }

    /// The payload without pad (a CNP's 16 reserved bytes).
    #[inline(always)]
    pub fn payload(&self) -> &'a [u8] {
        let at = self.payload as usize;
        &self.frame[at..at + self.payload_len as usize]
    }

    /// The ICRC as carried.
    #[inline]
    pub fn icrc(&self) -> u32 {
        let at = self.icrc as usize;
        let mut t = [0u8; ICRC_LEN];
        t.copy_from_slice(&self.frame[at..at + ICRC_LEN]);
        icrc::read(&t)
    }

    /// The ICRC this frame should carry (computed over its bytes).
    #[inline]
    pub fn computed_icrc(&self) -> u32 {
        icrc::compute_in_frame(self.version, self.frame, self.ip_at(), self.icrc as usize)
    }

    /// Every header, decoded into the owned representation.
    pub fn headers(&self) -> RoceHeaders {
        let f = self.frame;
        let e = EthernetFrame::new_unchecked(f);
        let vlan = (self.ip_at() > eth::HEADER_LEN)
            .then(|| VlanHeader::new_unchecked(&f[eth::HEADER_LEN..]).tag());
        let ip = match self.version {
            IpVersion::V4 => ipv4::repr(&Ipv4Packet::new_unchecked(&f[self.ip_at()..])),
            IpVersion::V6 => ipv6::repr(&Ipv6Packet::new_unchecked(&f[self.ip_at()..])),
        };
        let udp_at = self.bth_at() - udp::HEADER_LEN;
        RoceHeaders {
            eth: EthRepr {
                dst: e.dst_addr(),
                src: e.src_addr(),
                vlan,
            },
            ip,
            udp: UdpRepr::parse(&UdpPacket::new_unchecked(&f[udp_at..])),
            bth: BthRepr::parse_checked(&self.bth(), self.opcode),
            reth: self.reth(),
            aeth: self.aeth(),
            atomic_eth: self.atomic_eth(),
            atomic_ack_eth: self.atomic_ack_eth(),
            immdt: self.immdt(),
            ieth: self.ieth(),
            deth: self.deth(),
        }
    }

    /// The owned [`RoceFrame`] (headers decoded, payload still borrowed).
    pub fn to_frame(&self) -> RoceFrame<'a> {
        RoceFrame {
            headers: self.headers(),
            payload: self.payload(),
            pad: self.pad_count(),
            icrc: self.icrc(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::bytes::get16;
    use crate::wire::eth::ethertype;
    use crate::wire::{
        emit_frame, parse_frame, parse_frame_view, IpRepr, VlanTag, ROCE_V2_UDP_PORT,
    };

    fn frames() -> Vec<Vec<u8>> {
        use crate::wire::{
            AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, EthRepr, RethRepr, UdpRepr,
        };
        let mut out = Vec::new();
        let ips = [
            IpRepr::V4 {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
                dscp: 26,
                ecn: Ecn::Ce,
                ttl: 64,
                ident: 7,
                dont_fragment: true,
            },
            IpRepr::V6 {
                src: "fd00::1".parse().unwrap(),
                dst: "fd00::2".parse().unwrap(),
                dscp: 46,
                ecn: Ecn::Ect1,
                flow_label: 0x12345,
                hop_limit: 9,
            },
        ];
        for ip in ips {
            for vlan in [
                None,
                Some(VlanTag {
                    pcp: 3,
                    dei: false,
                    vid: 100,
                }),
            ] {
                for op in Opcode::ALL {
                    if op == Opcode::Cnp {
                        continue;
                    }
                    let h = RoceHeaders {
                        eth: EthRepr {
                            dst: [2, 0, 0, 0, 0, 2],
                            src: [2, 0, 0, 0, 0, 1],
                            vlan,
                        },
                        ip,
                        udp: UdpRepr {
                            src_port: 0xC001,
                            dst_port: ROCE_V2_UDP_PORT,
                        },
                        bth: BthRepr {
                            opcode: op,
                            solicited: true,
                            mig_req: false,
                            pad_count: 0,
                            pkey: 0xFFFF,
                            fecn: false,
                            becn: true,
                            dest_qp: 0x12_3456,
                            ack_req: true,
                            psn: 0xAB_CDEF,
                        },
                        reth: op.has_reth().then_some(RethRepr {
                            va: 0x1122_3344_5566_7788,
                            rkey: 0xDEAD_BEEF,
                            dma_len: 3,
                        }),
                        aeth: op.has_aeth().then_some(AethRepr {
                            syndrome: 0x61,
                            msn: 0x00_1234,
                        }),
                        atomic_eth: op.has_atomic_eth().then_some(AtomicEthRepr {
                            va: 0x1000,
                            rkey: 5,
                            swap_add: 6,
                            compare: 7,
                        }),
                        atomic_ack_eth: op
                            .has_atomic_ack_eth()
                            .then_some(AtomicAckEthRepr { orig: 99 }),
                        immdt: op.has_immdt().then_some(0xCAFE_F00D),
                        ieth: op.has_ieth().then_some(0x0BAD_CAFE),
                        deth: op.has_deth().then_some(DethRepr {
                            qkey: 0x8001_0000,
                            src_qp: 0x00_ABCD,
                        }),
                    };
                    let payload: &[u8] = if op.has_payload() && !op.is_first() && !op.is_middle() {
                        b"abc"
                    } else {
                        b""
                    };
                    let mut buf = vec![0u8; 256];
                    let n = emit_frame(&h, payload, &mut buf).unwrap();
                    buf.truncate(n);
                    out.push(buf);
                }
            }
        }
        out
    }

    #[test]
    fn accessors_agree_with_the_owned_headers() {
        for f in frames() {
            let v = parse_frame_view(&f).unwrap();
            let owned = parse_frame(&f).unwrap();
            let h = owned.headers;
            assert_eq!(v.to_frame(), owned);
            assert_eq!(v.opcode(), h.bth.opcode);
            assert_eq!(v.psn(), h.bth.psn);
            assert_eq!(v.dest_qp(), h.bth.dest_qp);
            assert_eq!(v.ack_req(), h.bth.ack_req);
            assert_eq!(v.ecn(), h.ip.ecn());
            assert_eq!(v.reth(), h.reth);
            assert_eq!(v.aeth(), h.aeth);
            assert_eq!(v.atomic_eth(), h.atomic_eth);
            assert_eq!(v.atomic_ack_eth(), h.atomic_ack_eth);
            assert_eq!(v.immdt(), h.immdt);
            assert_eq!(v.ieth(), h.ieth);
            assert_eq!(v.deth(), h.deth);
            assert_eq!(v.payload(), owned.payload);
            match h.ip {
                IpRepr::V4 { src, dst, .. } => {
                    assert_eq!(v.ipv4_addrs(), Some((src, dst)));
                    assert_eq!(v.ipv6_addrs(), None);
                }
                IpRepr::V6 { src, dst, .. } => {
                    assert_eq!(v.ipv6_addrs(), Some((src, dst)));
                    assert_eq!(v.ipv4_addrs(), None);
                }
            }
        }
    }

    /// Bits of each byte that neither the parser nor the ICRC looks at:
    /// MAC addresses, the VLAN TCI, and the fields the ICRC masks.
    fn free_bits(f: &[u8]) -> Vec<u8> {
        let mut free = vec![0u8; f.len()];
        free[..12].fill(0xFF);
        let ip = if get16(f, 12) == ethertype::VLAN {
            free[14..16].fill(0xFF);
            18
        } else {
            14
        };
        let udp = if f[ip] >> 4 == 4 {
            for i in [1, 8, 10, 11] {
                free[ip + i] = 0xFF;
            }
            ip + 20
        } else {
            free[ip] = 0x0F;
            for i in [1, 2, 3, 7] {
                free[ip + i] = 0xFF;
            }
            ip + 40
        };
        for i in [6, 7, 8 + 4] {
            free[udp + i] = 0xFF;
        }
        free
    }

    #[test]
    fn every_truncation_and_covered_bit_flip_is_rejected() {
        for f in frames() {
            for cut in 0..f.len() {
                assert!(parse_frame_view(&f[..cut]).is_err(), "cut {cut}");
            }
            let free = free_bits(&f);
            for i in 0..f.len() {
                for flip in [0x01u8, 0x10, 0x80, 0xFF] {
                    let mut g = f.clone();
                    g[i] ^= flip;
                    let harmless = flip & !free[i] == 0;
                    let v = parse_frame_view(&g);
                    assert_eq!(v.is_ok(), harmless, "byte {i} ^ {flip:#04x}: {v:?}");
                    assert_eq!(v.map(|v| v.to_frame()), parse_frame(&g));
                }
            }
        }
    }
}
