//! What an endpoint is configured with ([`EndpointConfig`]) and what
//! connecting one of its QPs takes: the peer's side ([`RemoteQp`]) and
//! ours ([`ConnectOptions`]).

use core::net::{IpAddr, Ipv4Addr};

use crate::cc::CcConfig;
use crate::rc::{Access, Mtu, QpAttr, Seed};
use crate::wire::crc32::{copy_then_update_after, CopyCrc};
use crate::wire::{Ecn, VlanTag};

/// Most QPs one endpoint (one engine, one queue) holds by default, and the
/// limit the CLI tools check `-q` against: its memory is what
/// `docs/architecture.md` ("QP limits") states. [`EndpointConfig::max_qps`]
/// may be set higher, up to the whole QP number space.
pub const MAX_QPS_PER_ENGINE: u32 = 1 << 16;

/// The seed of [`EndpointConfig::default`]: fixed, so that runs of the
/// simulator and the tests are reproducible. An endpoint facing a network
/// needs a secret one (the engine's devices draw theirs from the OS).
pub const DEFAULT_SEED: Seed = [0x726f_6365_2d78_6470, 0x7365_6564_0000_0001];

/// Endpoint configuration.
#[derive(Debug, Clone, Copy)]
pub struct EndpointConfig {
    /// Source MAC of every frame.
    pub local_mac: [u8; 6],
    /// Source IP (the GID); IPv4 or IPv6.
    pub local_ip: IpAddr,
    /// Most QPs this endpoint will hold (default [`MAX_QPS_PER_ENGINE`]).
    pub max_qps: u32,
    /// Secret seed of the QP numbers, initial PSNs and memory keys this
    /// endpoint draws (`rc::random`). Unpredictable numbers need an
    /// unpredictable seed: the engine's devices use the OS CSPRNG.
    pub seed: Seed,
    /// Congestion control: CNP pacing, CNP DSCP, DCQCN on/off and
    /// parameters, line rate (see [`crate::cc::CcConfig`]).
    pub cc: CcConfig,
    /// Most request packets this endpoint's QPs together leave
    /// unacknowledged before a QP's next new packet waits (retransmissions
    /// never do); 0: no limit. Default [`DEFAULT_MAX_INFLIGHT_PACKETS`].
    pub max_inflight_packets: u32,
    /// Copies each payload of a templated packet into its frame while
    /// extending the ICRC over it. Default the portable
    /// [`copy_then_update_after`] (a copy, then the CRC); the I/O crate
    /// gives its endpoints its one-pass SIMD function where the CPU has it
    /// (`io::copy_crc`). Any function given must return exactly the
    /// portable results.
    pub copy_crc: CopyCrc,
    /// The QP numbers this endpoint draws from ([`QpnRange`]; default the
    /// whole space, `FIRST_QPN..=MAX_QPN`). Endpoints that share one
    /// interface through a service each get a block of their own, so
    /// that the service finds a frame's endpoint by its destination QP
    /// number (`docs/shared-engine.md`).
    pub qpns: QpnRange,
}

/// An inclusive range of QP numbers (see [`EndpointConfig::qpns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpnRange {
    pub first: u32,
    pub last: u32,
}

impl QpnRange {
    /// Every number an endpoint may give a QP.
    pub const ALL: QpnRange = QpnRange {
        first: super::FIRST_QPN,
        last: super::MAX_QPN,
    };

    /// Whether `qpn` is in the range.
    pub fn contains(&self, qpn: u32) -> bool {
        (self.first..=self.last).contains(&qpn)
    }

    /// The range clamped to the numbers an endpoint may give a QP (0 and
    /// 1 and the reserved ones below `FIRST_QPN` never are); None when
    /// nothing is left.
    pub fn clamped(self) -> Option<QpnRange> {
        let r = QpnRange {
            first: self.first.max(super::FIRST_QPN),
            last: self.last.min(super::MAX_QPN),
        };
        (r.first <= r.last).then_some(r)
    }
}

/// [`EndpointConfig::max_inflight_packets`] by default: a quarter of the
/// packets a default AF_XDP receive ring holds at 4096-byte PMTU (2048
/// descriptors, two per packet), so that what all QPs send at once fits
/// the peer's ring with room to spare. One QP alone is bounded by its own
/// window of 128 PSNs (`rc::MAX_OUTSTANDING_PSNS`); the limit binds from
/// two streaming QPs on. Without it, `roce-xdp loopback --qps 4096` (1000
/// QPs starting a 64 KiB message at once) overflowed the responder's ring
/// and stalled; with 256 or 512 it completed with no drop on the
/// development VM's veth pair.
pub const DEFAULT_MAX_INFLIGHT_PACKETS: u32 = 256;

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            local_mac: [0x02, 0, 0, 0, 0, 1],
            local_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            max_qps: MAX_QPS_PER_ENGINE,
            seed: DEFAULT_SEED,
            cc: CcConfig::default(),
            max_inflight_packets: DEFAULT_MAX_INFLIGHT_PACKETS,
            copy_crc: copy_then_update_after,
            qpns: QpnRange::ALL,
        }
    }
}

/// What a peer tells us out of band to connect one QP
/// (`docs/connection-setup.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteQp {
    pub qpn: u32,
    /// The peer's first send PSN (our expected PSN).
    pub psn: u32,
    pub mac: [u8; 6],
    pub ip: IpAddr,
}

/// Options for [`Endpoint::connect`](super::Endpoint::connect); the
/// defaults are the verbs-style defaults of [`QpAttr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectOptions {
    pub path_mtu: Mtu,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    /// Our first send PSN.
    pub sq_psn: u32,
    /// DSCP of data packets; `None` = the endpoint's
    /// `cc.marking.data_dscp` (default 26).
    pub dscp: Option<u8>,
    /// ECN codepoint of data packets; `None` = the endpoint's
    /// `cc.marking.data_ecn` (default ECT(0)).
    pub ecn: Option<Ecn>,
    /// 0 = derive from the QPN.
    pub udp_src_port: u16,
    /// 802.1Q tag of every frame this QP sends (`None` = untagged). Tagged
    /// frames received are accepted either way (the XDP program steers
    /// RoCE with or without one tag).
    pub vlan: Option<VlanTag>,
    /// The remote operations the peer may run on this QP (verbs
    /// `qp_access_flags`, set at INIT as perftest does): REMOTE_WRITE,
    /// REMOTE_READ, REMOTE_ATOMIC. Default none, as [`QpAttr`]'s: a QP
    /// that the peer writes to, reads from or runs atomics on must set
    /// them; SENDs need none.
    pub access: Access,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        let a = QpAttr::default();
        ConnectOptions {
            path_mtu: a.path_mtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            min_rnr_timer: a.min_rnr_timer,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            sq_psn: 0,
            dscp: None,
            ecn: None,
            udp_src_port: 0,
            vlan: None,
            access: a.access,
        }
    }
}
