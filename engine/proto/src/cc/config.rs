//! Congestion-control configuration: [`CcConfig`] for one endpoint, and
//! how a sender marks its packets ([`EcnMarking`]: ECN codepoint and DSCP
//! for RoCE data, DSCP for CNPs; `docs/congestion.md`, "ECN marking").

use core::time::Duration;

use super::dcqcn::DcqcnParams;
use super::notification_point::DEFAULT_MIN_TIME_BETWEEN_CNPS;
use crate::wire::{Ecn, IpRepr};

/// DSCP of RoCE data packets by default: 26 (AF31). With ECT(0) this makes
/// the IPv4 TOS byte 106 (26 << 2 | 0b10), NVIDIA's default RoCE traffic
/// class, so switches configured for NVIDIA NICs put our traffic in the same
/// lossless, ECN-marking queue.
pub const DEFAULT_DATA_DSCP: u8 = 26;

/// DSCP of CNPs by default: 48 (CS6), NVIDIA's default CNP priority, so CNPs
/// skip the congested data queue.
pub const DEFAULT_CNP_DSCP: u8 = 48;

/// Congestion-control configuration of one endpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CcConfig {
    /// ECN/DSCP marking of sent packets.
    pub marking: EcnMarking,
    /// Notification point: at most one CNP per QP per this interval
    /// (zero = one CNP per CE-marked packet). Default 4 us.
    pub min_time_between_cnps: Duration,
    /// Reaction point on (default) or off. Off: CNPs are counted as
    /// `rp_cnp_ignored` and transmissions are never rate-limited. The
    /// notification point works either way.
    pub dcqcn_enabled: bool,
    /// DCQCN parameters (default [`DcqcnParams::nvidia_default`]).
    pub dcqcn: DcqcnParams,
    /// Line rate of the endpoint's link, Gb/s: where DCQCN starts and the
    /// most it recovers to (unless `dcqcn.max_rate_mbps` is lower).
    /// Default 100.
    pub line_rate_gbps: f64,
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig {
            marking: EcnMarking::default(),
            min_time_between_cnps: DEFAULT_MIN_TIME_BETWEEN_CNPS,
            dcqcn_enabled: true,
            dcqcn: DcqcnParams::nvidia_default(),
            line_rate_gbps: 100.0,
        }
    }
}

/// ECN and DSCP marking of the packets this endpoint sends.
///
/// CNPs are never ECN-capable (Not-ECT): a CNP must not itself be marked and
/// trigger another CNP. That is fixed, not configurable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcnMarking {
    /// ECN codepoint of data packets (requests, responses, ACKs). Default
    /// ECT(0). Not-ECT switches ECN off: switches then drop instead of mark.
    /// Setting CE here is refused by [`EcnMarking::validate`].
    pub data_ecn: Ecn,
    /// DSCP (6 bits) of data packets. Default [`DEFAULT_DATA_DSCP`].
    pub data_dscp: u8,
    /// DSCP (6 bits) of CNPs. Default [`DEFAULT_CNP_DSCP`].
    pub cnp_dscp: u8,
}

/// Why an [`EcnMarking`] cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkingError {
    /// A sender must not mark its own packets CE (RFC 3168 §5): choose
    /// ECT(0), ECT(1) or Not-ECT.
    SenderCe,
    /// A DSCP is six bits (0..=63).
    DscpOutOfRange(u8),
}

impl core::fmt::Display for MarkingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MarkingError::SenderCe => {
                f.write_str("a sender may not mark packets CE; use ECT(0), ECT(1) or Not-ECT")
            }
            MarkingError::DscpOutOfRange(d) => write!(f, "DSCP {d} is out of range; use 0..=63"),
        }
    }
}

impl Default for EcnMarking {
    fn default() -> Self {
        EcnMarking {
            data_ecn: Ecn::Ect0,
            data_dscp: DEFAULT_DATA_DSCP,
            cnp_dscp: DEFAULT_CNP_DSCP,
        }
    }
}

impl EcnMarking {
    /// The ECN codepoint of CNPs: always Not-ECT.
    pub const CNP_ECN: Ecn = Ecn::NotEct;

    /// Check the values: DSCPs within 6 bits, data ECN not CE.
    pub fn validate(&self) -> Result<(), MarkingError> {
        if self.data_ecn == Ecn::Ce {
            return Err(MarkingError::SenderCe);
        }
        for d in [self.data_dscp, self.cnp_dscp] {
            if d > 63 {
                return Err(MarkingError::DscpOutOfRange(d));
            }
        }
        Ok(())
    }

    /// IPv4 TOS / IPv6 traffic-class byte of data packets.
    pub fn data_tos(&self) -> u8 {
        (self.data_dscp << 2) | self.data_ecn as u8
    }

    /// IPv4 TOS / IPv6 traffic-class byte of CNPs.
    pub fn cnp_tos(&self) -> u8 {
        (self.cnp_dscp << 2) | Self::CNP_ECN as u8
    }

    /// Set DSCP and ECN of a data packet's IP header.
    pub fn mark_data(&self, ip: &mut IpRepr) {
        set_dscp_ecn(ip, self.data_dscp, self.data_ecn);
    }

    /// Set DSCP and ECN (Not-ECT) of a CNP's IP header.
    pub fn mark_cnp(&self, ip: &mut IpRepr) {
        set_dscp_ecn(ip, self.cnp_dscp, Self::CNP_ECN);
    }
}

/// The ECN codepoint carried by an IP header.
pub fn ip_ecn(ip: &IpRepr) -> Ecn {
    match ip {
        IpRepr::V4 { ecn, .. } | IpRepr::V6 { ecn, .. } => *ecn,
    }
}

fn set_dscp_ecn(ip: &mut IpRepr, new_dscp: u8, new_ecn: Ecn) {
    match ip {
        IpRepr::V4 { dscp, ecn, .. } | IpRepr::V6 { dscp, ecn, .. } => {
            *dscp = new_dscp;
            *ecn = new_ecn;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    #[test]
    fn defaults_match_nvidia_traffic_classes() {
        let m = EcnMarking::default();
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.data_tos(), 106);
        assert_eq!(m.cnp_tos(), 192);
    }

    #[test]
    fn validation_refuses_ce_and_wide_dscp() {
        let ce = EcnMarking {
            data_ecn: Ecn::Ce,
            ..Default::default()
        };
        assert_eq!(ce.validate(), Err(MarkingError::SenderCe));
        let wide = EcnMarking {
            cnp_dscp: 64,
            ..Default::default()
        };
        assert_eq!(wide.validate(), Err(MarkingError::DscpOutOfRange(64)));
    }

    #[test]
    fn marks_ip_headers() {
        let mut ip = IpRepr::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dscp: 0,
            ecn: Ecn::NotEct,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
        };
        let m = EcnMarking {
            data_ecn: Ecn::Ect1,
            data_dscp: 10,
            cnp_dscp: 46,
        };
        m.mark_data(&mut ip);
        assert!(matches!(
            ip,
            IpRepr::V4 {
                dscp: 10,
                ecn: Ecn::Ect1,
                ..
            }
        ));
        assert_eq!(ip_ecn(&ip), Ecn::Ect1);
        m.mark_cnp(&mut ip);
        assert!(matches!(
            ip,
            IpRepr::V4 {
                dscp: 46,
                ecn: Ecn::NotEct,
                ..
            }
        ));
    }
}
