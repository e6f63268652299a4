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

    /// Make an address handle under number `id`, chosen by the caller (a
    /// device that numbers its handles across its queues' endpoints, each
    /// of which keeps a copy). Refused when `id` is taken or beyond
    /// [`MAX_AHS`].
    pub fn create_at(
        &mut self,
        id: u32,
        pd: u32,
        attr: &AhAttr,
        local_ip: IpAddr,
    ) -> Result<u32, VerbsError> {
        if id as usize >= MAX_AHS {
            return Err(VerbsError::InvalidArgument(
                "address handle number out of range",
            ));
        }
        if matches!(self.slots.get(id as usize), Some(Some(_))) {
            return Err(VerbsError::InvalidArgument("address handle number in use"));
        }
        if local_ip.is_ipv4() != attr.remote.ip.is_ipv4() {
            return Err(VerbsError::InvalidArgument(
                "the address handle's IP is not of the endpoint's family",
            ));
        }
        if attr.flow_label > 0xF_FFFF {
            return Err(VerbsError::InvalidArgument("flow_label must fit 20 bits"));
        }
        let i = id as usize;
        if i >= self.slots.len() {
            // The numbers skipped become free ones.
            let first = self.slots.len() as u32;
            self.slots.resize(i + 1, None);
            self.free.extend(first..id);
        } else {
            self.free.retain(|&f| f != id);
        }
        self.slots[i] = Some(Ah { pd, attr: *attr });
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
    fn numbers_chosen_by_the_caller_leave_the_others_free() {
        let local = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let mut t = AhTable::default();
        assert_eq!(t.create_at(3, 0, &v4(2), local), Ok(3));
        assert!(t.create_at(3, 0, &v4(2), local).is_err());
        assert!(t.create_at(MAX_AHS as u32, 0, &v4(2), local).is_err());
        let drawn: Vec<u32> = (0..4)
            .map(|_| t.create(0, &v4(5), local).unwrap())
            .collect();
        assert!(!drawn.contains(&3));
        assert_eq!(drawn.iter().filter(|&&d| d < 3).count(), 3);
        assert_eq!(t.len(), 5);
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
