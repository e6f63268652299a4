//! Address handles: where a UD send goes (verbs `ibv_ah_attr` /
//! `ibv_create_ah`; RoCE v2's address vector: the destination GID is an IP
//! address, the link address a MAC). The endpoint keeps them by number;
//! a send names one ([`super::UdSendWr::ah`]).

use core::net::IpAddr;

use crate::rc::{RemoteAddress, VerbsError};

/// What an address handle says (`ibv_ah_attr` with its GRH, as RoCE v2
/// uses it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AhAttr {
    /// The destination's MAC, IP (its GID: IPv4 or IPv6, the family of
    /// the endpoint's own address), VLAN, and the UDP source port to send
    /// from (`None`: the sending QP's own, derived from its number as rxe
    /// does).
    pub remote: RemoteAddress,
    /// GRH traffic class: the IP DSCP (high 6 bits) and ECN (low 2 bits),
    /// as rxe puts `grh.traffic_class` in the IPv4 TOS / IPv6 traffic
    /// class.
    pub traffic_class: u8,
    /// GRH hop limit: the IPv4 TTL / IPv6 hop limit.
    pub hop_limit: u8,
    /// GRH flow label (IPv6 only, 20 bits).
    pub flow_label: u32,
    /// Source GID index (kept for the verbs layer: the endpoint has one
    /// address, so only its own GID is a source).
    pub sgid_index: u8,
}

impl Default for AhAttr {
    fn default() -> Self {
        AhAttr {
            remote: RemoteAddress::default(),
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
            sgid_index: 0,
        }
    }
}

/// One address handle: its attributes and its protection domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ah {
    pd: u32,
    attr: AhAttr,
}

/// The endpoint's address handles, by number (a slot index; numbers of
/// destroyed handles are reused).
#[derive(Debug, Default)]
pub struct AhTable {
    slots: Vec<Option<Ah>>,
    free: Vec<u32>,
    live: usize,
}

/// The most address handles one endpoint keeps.
pub const MAX_AHS: usize = 1 << 20;

impl AhTable {
    /// Make an address handle in protection domain `pd`; `local_ip` is the
    /// endpoint's address, whose family the destination must share.
    pub fn create(&mut self, pd: u32, attr: &AhAttr, local_ip: IpAddr) -> Result<u32, VerbsError> {
        if local_ip.is_ipv4() != attr.remote.ip.is_ipv4() {
            return Err(VerbsError::InvalidArgument(
                "the address handle's IP is not of the endpoint's family",
            ));
        }
        if attr.flow_label > 0xF_FFFF {
            return Err(VerbsError::InvalidArgument("flow_label must fit 20 bits"));
        }
        if self.live >= MAX_AHS {
            return Err(VerbsError::ResourceExhausted);
        }
        let ah = Ah { pd, attr: *attr };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(ah);
                id
            }
            None => {
                self.slots.push(Some(ah));
                (self.slots.len() - 1) as u32
            }
        };
        self.live += 1;
        Ok(id)
    }

    /// Destroy address handle `id` (sends already posted with it and not
    /// yet sent complete with an error, as rxe's do when their AH is gone).
    pub fn destroy(&mut self, id: u32) -> Result<(), VerbsError> {
        match self.slots.get_mut(id as usize) {
            Some(slot @ Some(_)) => {
                *slot = None;
                self.free.push(id);
                self.live -= 1;
                Ok(())
            }
            _ => Err(VerbsError::InvalidArgument(
                "no address handle has this number",
            )),
        }
    }

    /// The attributes of address handle `id`, and its protection domain.
    pub fn get(&self, id: u32) -> Option<(u32, &AhAttr)> {
        self.slots
            .get(id as usize)?
            .as_ref()
            .map(|a| (a.pd, &a.attr))
    }

    /// Address handles alive.
    pub fn len(&self) -> usize {
        self.live
    }

    /// No address handle alive.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn v4(last: u8) -> AhAttr {
        AhAttr {
            remote: RemoteAddress {
                ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)),
                ..RemoteAddress::default()
            },
            ..AhAttr::default()
        }
    }

    #[test]
    fn numbers_are_reused_and_unknown_ones_refused() {
        let local = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mut t = AhTable::default();
        let a = t.create(0, &v4(2), local).unwrap();
        let b = t.create(3, &v4(3), local).unwrap();
        assert_ne!(a, b);
        assert_eq!(
            t.get(b).map(|(pd, at)| (pd, at.remote.ip)),
            Some((3, v4(3).remote.ip))
        );
        t.destroy(a).unwrap();
        assert!(t.get(a).is_none());
        assert!(t.destroy(a).is_err());
        assert!(t.destroy(99).is_err());
        assert_eq!(t.create(0, &v4(4), local).unwrap(), a);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn the_family_must_be_the_endpoints() {
        let mut t = AhTable::default();
        let local6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert!(t.create(0, &v4(2), local6).is_err());
        let bad_flow = AhAttr {
            flow_label: 1 << 20,
            ..v4(2)
        };
        assert!(t
            .create(0, &bad_flow, IpAddr::V4(Ipv4Addr::LOCALHOST))
            .is_err());
        assert!(t.is_empty());
    }
}
