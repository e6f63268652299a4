//! QP attributes, states and the verbs state machine's legal transitions.

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use super::mr::Access;
use crate::wire::{rnr_timer_micros, Ecn, VlanTag};

/// QP states (verbs `IBV_QPS_*`, the subset RC uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum QpState {
    /// Created, nothing works.
    #[default]
    Reset,
    /// Receives can be posted; nothing is sent or received.
    Init,
    /// Ready to receive: the responder works.
    Rtr,
    /// Ready to send: requester and responder work.
    Rts,
    /// Failed: every outstanding request completed with an error or "flushed".
    Error,
}

/// Path MTU: the largest payload of one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mtu {
    Mtu256,
    Mtu512,
    #[default]
    Mtu1024,
    Mtu2048,
    Mtu4096,
}

impl Mtu {
    /// Payload bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            Mtu::Mtu256 => 256,
            Mtu::Mtu512 => 512,
            Mtu::Mtu1024 => 1024,
            Mtu::Mtu2048 => 2048,
            Mtu::Mtu4096 => 4096,
        }
    }

    /// The MTU for a byte count, if it is one of 256, 512, 1024, 2048, 4096.
    pub const fn from_bytes(b: u32) -> Option<Mtu> {
        Some(match b {
            256 => Mtu::Mtu256,
            512 => Mtu::Mtu512,
            1024 => Mtu::Mtu1024,
            2048 => Mtu::Mtu2048,
            4096 => Mtu::Mtu4096,
            _ => return None,
        })
    }
}

/// Where the peer QP lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteAddress {
    pub mac: [u8; 6],
    /// The peer's IP (its GID); must be the same family as the endpoint's.
    pub ip: IpAddr,
    /// 802.1Q tag of every frame to this peer (the VLAN of the GID's
    /// interface, as in RoCE's address vector); `None` = untagged.
    pub vlan: Option<VlanTag>,
    /// The UDP source port the peer QP sends from, when it is known and
    /// stable (rxe and this engine derive it from the QP number): `Some`
    /// makes the QP drop packets from any other port, besides rxe's
    /// IP-pair check (`dropped_wrong_peer`; `docs/security.md`). `None`
    /// (the default) checks the IP pair only, as rxe does.
    pub udp_src_port: Option<u16>,
}

impl Default for RemoteAddress {
    fn default() -> Self {
        RemoteAddress {
            mac: [0; 6],
            ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            vlan: None,
            udp_src_port: None,
        }
    }
}

/// QP attributes (`ibv_qp_attr`, the subset RC over RoCE v2 uses). Which
/// fields a [`crate::endpoint::Endpoint::modify_qp`] call applies is given by
/// a [`QpAttrMask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    /// Target state.
    pub state: QpState,
    /// Path MTU (payload bytes per packet).
    pub path_mtu: Mtu,
    /// Local ACK timeout exponent: 4.096 us * 2^timeout; 0 = wait forever.
    pub timeout: u8,
    /// Retries (0..=7) after a timeout or sequence error before "retry
    /// exceeded". 7 = infinite, as rxe does (an implementation choice,
    /// `docs/reliable-connection.md`, "Go-back-N"; we follow it so a 7
    /// behaves the same against rxe peers and so long simulations at high
    /// loss never give up; use 0..=6 for a finite budget).
    pub retry_cnt: u8,
    /// Retries (0..=7) after RNR NAKs; 7 = infinite.
    pub rnr_retry: u8,
    /// RNR timer code (0..=31) this QP's responder puts in its RNR NAKs.
    pub min_rnr_timer: u8,
    /// Outstanding READ/atomic requests this QP may have as a requester.
    pub max_rd_atomic: u8,
    /// Outstanding READ/atomic requests this QP accepts as a responder.
    pub max_dest_rd_atomic: u8,
    /// First PSN the requester sends (24 bits).
    pub sq_psn: u32,
    /// First PSN the responder expects (24 bits).
    pub rq_psn: u32,
    /// The peer's QP number (24 bits).
    pub dest_qpn: u32,
    /// The peer's MAC and IP.
    pub remote: RemoteAddress,
    /// UDP source port (flow entropy); 0 = derive `0xC000 | hash(qpn)`.
    pub udp_src_port: u16,
    /// DSCP of outgoing data packets (default 26: with ECT(0), traffic class
    /// 106, NVIDIA's RoCE default; see `cc::config`).
    pub dscp: u8,
    /// ECN codepoint of outgoing packets (RoCE senders mark ECT(0)).
    pub ecn: Ecn,
    /// Partition key.
    pub pkey: u16,
    /// IPv4 TTL / IPv6 hop limit.
    pub hop_limit: u8,
    /// The remote operations this QP's responder accepts (verbs
    /// `qp_access_flags`): RDMA WRITE (with immediate too) needs
    /// REMOTE_WRITE, RDMA READ REMOTE_READ, an atomic REMOTE_ATOMIC, on
    /// top of the rights of the region it names; SENDs need none.
    /// LOCAL_WRITE is accepted and changes nothing. Default: none, as
    /// verbs gives a new QP (rxe); a QP that is written to, read from or
    /// used for atomics sets them (perftest sets all four at INIT).
    pub access: Access,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            state: QpState::Reset,
            path_mtu: Mtu::Mtu1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            sq_psn: 0,
            rq_psn: 0,
            dest_qpn: 0,
            remote: RemoteAddress::default(),
            udp_src_port: 0,
            dscp: crate::cc::DEFAULT_DATA_DSCP,
            ecn: Ecn::Ect0,
            pkey: crate::wire::DEFAULT_PKEY,
            hop_limit: 64,
            access: Access::NONE,
        }
    }
}

impl QpAttr {
    /// The local ACK timeout as a duration, `None` for timeout 0 (infinite).
    /// Rule (`docs/reliable-connection.md`, "Go-back-N", trigger 2):
    /// 4.096 us * 2^timeout.
    pub fn ack_timeout(&self) -> Option<Duration> {
        if self.timeout == 0 {
            None
        } else {
            Some(Duration::from_nanos(4096u64 << self.timeout.min(31)))
        }
    }
}

/// Which fields of a [`QpAttr`] to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QpAttrMask(pub u32);

impl QpAttrMask {
    pub const STATE: QpAttrMask = QpAttrMask(1 << 0);
    pub const PATH_MTU: QpAttrMask = QpAttrMask(1 << 1);
    pub const TIMEOUT: QpAttrMask = QpAttrMask(1 << 2);
    pub const RETRY_CNT: QpAttrMask = QpAttrMask(1 << 3);
    pub const RNR_RETRY: QpAttrMask = QpAttrMask(1 << 4);
    pub const MIN_RNR_TIMER: QpAttrMask = QpAttrMask(1 << 5);
    pub const MAX_QP_RD_ATOMIC: QpAttrMask = QpAttrMask(1 << 6);
    pub const MAX_DEST_RD_ATOMIC: QpAttrMask = QpAttrMask(1 << 7);
    pub const SQ_PSN: QpAttrMask = QpAttrMask(1 << 8);
    pub const RQ_PSN: QpAttrMask = QpAttrMask(1 << 9);
    pub const DEST_QPN: QpAttrMask = QpAttrMask(1 << 10);
    /// The remote address (verbs `IBV_QP_AV`).
    pub const AV: QpAttrMask = QpAttrMask(1 << 11);
    pub const UDP_SRC_PORT: QpAttrMask = QpAttrMask(1 << 12);
    /// DSCP and ECN.
    pub const TRAFFIC_CLASS: QpAttrMask = QpAttrMask(1 << 13);
    pub const PKEY: QpAttrMask = QpAttrMask(1 << 14);
    pub const HOP_LIMIT: QpAttrMask = QpAttrMask(1 << 15);
    /// The remote access rights (verbs `IBV_QP_ACCESS_FLAGS`); taken in
    /// RESET->INIT, INIT->INIT, INIT->RTR, RTR->RTS and RTS->RTS only.
    pub const ACCESS_FLAGS: QpAttrMask = QpAttrMask(1 << 16);
    /// Everything.
    pub const ALL: QpAttrMask = QpAttrMask((1 << 17) - 1);

    /// Every bit of `other` is set.
    pub const fn contains(self, other: QpAttrMask) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for QpAttrMask {
    type Output = QpAttrMask;
    fn bitor(self, rhs: QpAttrMask) -> QpAttrMask {
        QpAttrMask(self.0 | rhs.0)
    }
}

/// Whether the verbs state machine allows `from -> to`, and which attributes
/// the transition requires (verbs `ibv_modify_qp` table, RC).
pub fn transition_requires(from: QpState, to: QpState) -> Option<QpAttrMask> {
    use QpState::*;
    match (from, to) {
        (_, Reset) | (_, Error) => Some(QpAttrMask(0)),
        (Reset, Init) | (Init, Init) => Some(QpAttrMask(0)),
        (Init, Rtr) => Some(QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN | QpAttrMask::AV),
        (Rtr, Rts) => Some(QpAttrMask::SQ_PSN),
        (Rts, Rts) => Some(QpAttrMask(0)),
        _ => None,
    }
}

/// Whether `from -> to` may set the access flags: the transitions that
/// take them in the kernel's verbs table for RC (`qp_state_table`, checked
/// by `ib_modify_qp_is_ok`, which rxe applies): RESET->INIT, INIT->INIT,
/// INIT->RTR, RTR->RTS and RTS->RTS. Moving to RESET or ERROR takes none.
/// (The kernel requires them at RESET->INIT; here they are optional, and
/// a QP that never sets them keeps none.)
pub fn access_flags_allowed(from: QpState, to: QpState) -> bool {
    use QpState::*;
    matches!(
        (from, to),
        (Reset, Init) | (Init, Init) | (Init, Rtr) | (Rtr, Rts) | (Rts, Rts)
    )
}

/// Validate attribute ranges; returns the name of the first bad one.
pub fn validate(attr: &QpAttr, mask: QpAttrMask) -> Result<(), &'static str> {
    let m = |b| mask.contains(b);
    if m(QpAttrMask::TIMEOUT) && attr.timeout > 31 {
        return Err("timeout must be 0..=31");
    }
    if m(QpAttrMask::RETRY_CNT) && attr.retry_cnt > 7 {
        return Err("retry_cnt must be 0..=7");
    }
    if m(QpAttrMask::RNR_RETRY) && attr.rnr_retry > 7 {
        return Err("rnr_retry must be 0..=7");
    }
    if m(QpAttrMask::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
        return Err("min_rnr_timer must be 0..=31");
    }
    if m(QpAttrMask::MAX_QP_RD_ATOMIC) && attr.max_rd_atomic == 0 {
        return Err("max_rd_atomic must be at least 1");
    }
    if m(QpAttrMask::MAX_DEST_RD_ATOMIC) && attr.max_dest_rd_atomic == 0 {
        return Err("max_dest_rd_atomic must be at least 1");
    }
    if m(QpAttrMask::SQ_PSN) && attr.sq_psn > 0xFF_FFFF {
        return Err("sq_psn must fit 24 bits");
    }
    if m(QpAttrMask::RQ_PSN) && attr.rq_psn > 0xFF_FFFF {
        return Err("rq_psn must fit 24 bits");
    }
    if m(QpAttrMask::DEST_QPN) && attr.dest_qpn > 0xFF_FFFF {
        return Err("dest_qpn must fit 24 bits");
    }
    if m(QpAttrMask::TRAFFIC_CLASS) && attr.dscp > 63 {
        return Err("dscp must be 0..=63");
    }
    Ok(())
}

/// The RNR wait for a timer code (low 5 bits used), by the encoding
/// [`rnr_timer_micros`] holds (IBTA Vol. 1, table 45).
pub fn rnr_delay(code: u8) -> Duration {
    Duration::from_micros(u64::from(rnr_timer_micros(code)))
}

/// Default UDP source port of a QP: rxe's base 0xC000 ORed with a hash of
/// the QPN (`docs/wire-format.md`, "Frame layout": src port = per-QP flow
/// entropy).
pub fn default_udp_src_port(qpn: u32) -> u16 {
    let h = qpn.wrapping_mul(0x9E37_79B1);
    0xC000 | ((h >> 18) as u16 & 0x3FFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_formula() {
        let a = QpAttr {
            timeout: 0,
            ..Default::default()
        };
        assert_eq!(a.ack_timeout(), None);
        let a = QpAttr {
            timeout: 1,
            ..Default::default()
        };
        assert_eq!(a.ack_timeout(), Some(Duration::from_nanos(8192)));
        let a = QpAttr {
            timeout: 14,
            ..Default::default()
        };
        assert_eq!(a.ack_timeout(), Some(Duration::from_nanos(4096 << 14)));
    }

    #[test]
    fn legal_transitions() {
        use QpState::*;
        assert!(transition_requires(Reset, Init).is_some());
        assert!(transition_requires(Reset, Rts).is_none());
        assert!(transition_requires(Init, Rts).is_none());
        assert!(transition_requires(Rts, Rtr).is_none());
        assert!(transition_requires(Error, Rts).is_none());
        assert!(transition_requires(Rts, Error).is_some());
        assert!(transition_requires(Error, Reset).is_some());
    }

    #[test]
    fn access_flags_only_where_verbs_takes_them() {
        use QpState::*;
        assert_eq!(QpAttr::default().access, Access::NONE);
        let states = [Reset, Init, Rtr, Rts, Error];
        let allowed = [
            (Reset, Init),
            (Init, Init),
            (Init, Rtr),
            (Rtr, Rts),
            (Rts, Rts),
        ];
        for from in states {
            for to in states {
                assert_eq!(
                    access_flags_allowed(from, to),
                    allowed.contains(&(from, to)),
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    #[test]
    fn src_ports_are_in_rxe_range() {
        for q in 0..1000 {
            assert!(default_udp_src_port(q) >= 0xC000);
        }
        assert_ne!(default_udp_src_port(17), default_udp_src_port(18));
    }

    #[test]
    fn rnr_table_ends() {
        assert_eq!(rnr_delay(1), Duration::from_micros(10));
        assert_eq!(rnr_delay(0), Duration::from_micros(655_360));
        assert_eq!(rnr_delay(31), Duration::from_micros(491_520));
    }
}
