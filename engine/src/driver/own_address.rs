//! The engine's own address, and what the transmit step does with a frame
//! addressed to it: two QPs of one engine connected to each other (the
//! local GID as the destination, as on rxe or a NIC) exchange frames that
//! would leave on the wire and never come back, since a NIC does not turn a
//! frame to its own MAC around, nor does AF_XDP. Such a frame is handed to
//! the engine's own receive path instead (`step.rs`,
//! [`super::step::DriverStep::transmit`]).

use std::net::IpAddr;

use crate::wire::{ethertype, EthernetFrame, Ipv4Packet, Ipv6Packet};

/// The MAC and IP (GID) the engine sends from: a frame it transmits to
/// both is for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnAddress {
    mac: [u8; 6],
    ip: IpAddr,
    /// Whether frames to ourselves are turned around here. Not in a
    /// process attached to a shared engine: a frame to the host's own
    /// address may be for another process's QP, and the service, which
    /// knows them all, turns it around.
    loops: bool,
}

impl OwnAddress {
    pub(crate) fn new(mac: [u8; 6], ip: IpAddr) -> OwnAddress {
        OwnAddress {
            mac,
            ip,
            loops: true,
        }
    }

    /// The address of an engine whose frames to itself leave through its
    /// port like any other (see `loops`).
    pub(crate) fn without_loopback(mac: [u8; 6], ip: IpAddr) -> OwnAddress {
        OwnAddress {
            mac,
            ip,
            loops: false,
        }
    }

    /// The MAC and IP.
    pub(crate) fn address(&self) -> ([u8; 6], IpAddr) {
        (self.mac, self.ip)
    }

    /// Our own MAC when `ip` is our own IP: what resolving our own address
    /// gives without asking the kernel (whose neighbour table has no entry
    /// for a local address, and ARP for it gets no answer).
    pub(crate) fn mac_of(&self, ip: IpAddr) -> Option<[u8; 6]> {
        (ip == self.ip).then_some(self.mac)
    }

    /// Whether `frame` is addressed to this engine: destination MAC and
    /// destination IP both ours. The MAC, at a fixed place whatever the
    /// VLAN tag or the IP version, is compared first: that one compare is
    /// all that a frame to another host pays. A frame to our IP through
    /// another MAC goes where it is addressed (a router may send it back).
    #[inline(always)]
    pub(crate) fn is_destination_of(&self, frame: &[u8]) -> bool {
        self.loops
            && frame.first_chunk::<6>() == Some(&self.mac)
            && self.ip_is_destination_of(frame)
    }

    /// The rest of [`OwnAddress::is_destination_of`]: the destination IP
    /// behind the Ethernet header and at most one VLAN tag, every length
    /// checked (false for anything short or of another family).
    #[inline(never)]
    fn ip_is_destination_of(&self, frame: &[u8]) -> bool {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return false;
        };
        let Ok((ether_type, at)) = eth.network_header() else {
            return false;
        };
        let Some(network) = frame.get(at..) else {
            return false;
        };
        match (self.ip, ether_type) {
            (IpAddr::V4(own), ethertype::IPV4) => {
                Ipv4Packet::new_checked(network).is_ok_and(|p| p.dst_addr() == own)
            }
            (IpAddr::V6(own), ethertype::IPV6) => {
                Ipv6Packet::new_checked(network).is_ok_and(|p| p.dst_addr() == own)
            }
            _ => false,
        }
    }
}

/// Frames the transmit step delivered to the engine itself instead of the
/// wire ([`OwnAddress::is_destination_of`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Looped {
    pub frames: u64,
    pub bytes: u64,
}

impl Looped {
    /// One more frame of `len` bytes.
    #[inline]
    pub(crate) fn count(&mut self, len: usize) {
        self.frames += 1;
        self.bytes += len as u64;
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;
    use crate::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
    use crate::rc::{Access, SendOp, SendWr, Sge};
    use crate::time::Instant;
    use crate::verbs::QpCaps;
    use crate::wire::VlanTag;

    const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
    const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
    const V4: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
    const PEER_V4: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
    const V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);

    /// The frame an endpoint at `MAC` (and `V4` or `V6`, the family of
    /// `ip`) sends first on a QP connected to `(mac, ip)`: a 40-byte SEND.
    fn frame(mac: [u8; 6], ip: IpAddr, vlan: Option<VlanTag>) -> Vec<u8> {
        let local_ip = match ip {
            IpAddr::V4(_) => IpAddr::V4(V4),
            IpAddr::V6(_) => IpAddr::V6(V6),
        };
        let mut ep = Endpoint::new(EndpointConfig {
            local_mac: MAC,
            local_ip,
            ..EndpointConfig::default()
        });
        let cq = ep.create_cq(16);
        let qpn = ep.create_qp(QpCaps::default().init_attr(cq)).unwrap();
        let peer = RemoteQp {
            qpn: 0x11,
            psn: 0,
            mac,
            ip,
        };
        let opts = ConnectOptions {
            vlan,
            ..ConnectOptions::default()
        };
        ep.connect(qpn, &peer, &opts).unwrap();
        let keys = ep
            .reg_mr(Box::new(vec![9u8; 64]), 0x1000, Access::ALL)
            .unwrap();
        let sge = Sge {
            lkey: keys.lkey,
            addr: 0x1000,
            length: 40,
        };
        ep.post_send(qpn, SendWr::new(1, SendOp::Send, sge))
            .unwrap();
        let mut buf = vec![0u8; 512];
        let len = ep
            .poll_transmit(Instant::from_nanos(0), &mut buf)
            .expect("the SEND is due");
        buf.truncate(len);
        buf
    }

    #[test]
    fn a_frame_to_our_mac_and_ip_is_ours_with_or_without_a_vlan_tag() {
        let own = OwnAddress::new(MAC, IpAddr::V4(V4));
        let tag = Some(VlanTag {
            pcp: 3,
            dei: false,
            vid: 100,
        });
        assert!(own.is_destination_of(&frame(MAC, V4.into(), None)));
        assert!(own.is_destination_of(&frame(MAC, V4.into(), tag)));
        let own6 = OwnAddress::new(MAC, IpAddr::V6(V6));
        assert!(own6.is_destination_of(&frame(MAC, V6.into(), None)));
        assert!(own6.is_destination_of(&frame(MAC, V6.into(), tag)));
    }

    #[test]
    fn a_frame_to_a_peer_is_not_ours() {
        let own = OwnAddress::new(MAC, IpAddr::V4(V4));
        // Another host, and our IP through another MAC (a router's).
        assert!(!own.is_destination_of(&frame(PEER_MAC, PEER_V4.into(), None)));
        assert!(!own.is_destination_of(&frame(PEER_MAC, V4.into(), None)));
        // Our MAC, another IP or another family.
        assert!(!own.is_destination_of(&frame(MAC, PEER_V4.into(), None)));
        assert!(!own.is_destination_of(&frame(MAC, V6.into(), None)));
        let own6 = OwnAddress::new(MAC, IpAddr::V6(V6));
        assert!(!own6.is_destination_of(&frame(MAC, V4.into(), None)));
    }

    #[test]
    fn a_truncated_frame_is_not_ours_and_does_not_panic() {
        let own = OwnAddress::new(MAC, IpAddr::V4(V4));
        let whole = frame(MAC, V4.into(), None);
        // Every prefix that cuts the destination IP short.
        for len in 0..34 {
            assert!(!own.is_destination_of(&whole[..len]), "{len} bytes");
        }
        assert!(own.is_destination_of(&whole[..34]));
        let tagged = frame(
            MAC,
            V4.into(),
            Some(VlanTag {
                pcp: 0,
                dei: false,
                vid: 5,
            }),
        );
        for len in 0..38 {
            assert!(!own.is_destination_of(&tagged[..len]), "{len} bytes");
        }
    }

    #[test]
    fn resolves_our_own_ip_to_our_mac() {
        let own = OwnAddress::new(MAC, IpAddr::V4(V4));
        assert_eq!(own.mac_of(V4.into()), Some(MAC));
        assert_eq!(own.mac_of(PEER_V4.into()), None);
        assert_eq!(own.mac_of(V6.into()), None);
    }
}
