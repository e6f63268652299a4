//! The kernel's ethtool interface (`SIOCETHTOOL`, `linux/ethtool.h`) for
//! what queue coverage needs (`docs/queue-coverage.md`): how many RX
//! queues an interface has, its RX classification (ntuple) rules, and its
//! RSS contexts. [`Ethtool`] is a socket bound to one interface in the
//! network namespace it was opened in; every call is one ioctl on it, so
//! it may be used from any thread afterwards.
//!
//! The structures are the uapi's, laid out by hand (`repr(C)`, explicit
//! padding, sizes checked at compile time) and passed by pointer: that
//! ioctl is the only `unsafe` here.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use thiserror::Error;

// Commands (linux/ethtool.h).
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_GRXRINGS: u32 = 0x2d;
const ETHTOOL_GRXCLSRLCNT: u32 = 0x2e;
const ETHTOOL_GRXCLSRULE: u32 = 0x2f;
const ETHTOOL_GRXCLSRLALL: u32 = 0x30;
const ETHTOOL_SRXCLSRLDEL: u32 = 0x31;
const ETHTOOL_SRXCLSRLINS: u32 = 0x32;
const ETHTOOL_GRSSH: u32 = 0x46;
const ETHTOOL_SRSSH: u32 = 0x47;

const UDP_V4_FLOW: u32 = 0x02;
const UDP_V6_FLOW: u32 = 0x06;
const FLOW_EXT: u32 = 0x8000_0000;
const FLOW_MAC_EXT: u32 = 0x4000_0000;
const FLOW_RSS: u32 = 0x2000_0000;
const RX_CLS_LOC_SPECIAL: u64 = 0x8000_0000;
const RX_CLS_LOC_ANY: u32 = 0xffff_ffff;
const ETH_RXFH_CONTEXT_ALLOC: u32 = 0xffff_ffff;

/// `union ethtool_flow_union`: 52 bytes, 4-aligned.
#[repr(C, align(4))]
#[derive(Clone, Copy)]
struct FlowUnion([u8; 52]);

/// `struct ethtool_flow_ext`.
#[repr(C)]
#[derive(Clone, Copy)]
struct FlowExt {
    padding: [u8; 2],
    h_dest: [u8; 6],
    vlan_etype: u16,
    vlan_tci: u16,
    data: [u32; 2],
}

/// `struct ethtool_rx_flow_spec`, its implicit padding made explicit.
#[repr(C)]
#[derive(Clone, Copy)]
struct RxFlowSpec {
    flow_type: u32,
    h_u: FlowUnion,
    h_ext: FlowExt,
    m_u: FlowUnion,
    m_ext: FlowExt,
    _pad0: u32,
    ring_cookie: u64,
    location: u32,
    _pad1: u32,
}

/// `struct ethtool_rxnfc` without its flexible `rule_locs` (which starts
/// at offset 188, inside this struct's tail padding).
#[repr(C)]
#[derive(Clone, Copy)]
struct Rxnfc {
    cmd: u32,
    flow_type: u32,
    data: u64,
    fs: RxFlowSpec,
    /// `rule_cnt` / `rss_context` (a union).
    rule_cnt: u32,
    _pad: u32,
}

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// `struct ethtool_rxfh` without its flexible `rss_config`.
#[repr(C)]
#[derive(Clone, Copy)]
struct RxfhHeader {
    cmd: u32,
    rss_context: u32,
    indir_size: u32,
    key_size: u32,
    hfunc: u8,
    /// `input_xfrm` and reserved bytes: zero (no change, no transform).
    rsvd8: [u8; 3],
    rsvd32: u32,
}

const RULE_LOCS_OFFSET: usize = 188;
const _: () = {
    assert!(std::mem::size_of::<FlowUnion>() == 52);
    assert!(std::mem::size_of::<FlowExt>() == 20);
    assert!(std::mem::size_of::<RxFlowSpec>() == 168);
    assert!(std::mem::offset_of!(RxFlowSpec, ring_cookie) == 152);
    assert!(std::mem::size_of::<Rxnfc>() == 192);
    assert!(std::mem::offset_of!(Rxnfc, rule_cnt) == 184);
    assert!(std::mem::size_of::<RawChannels>() == 36);
    assert!(std::mem::size_of::<RxfhHeader>() == 24);
};

/// Marker for the plain structs above.
///
/// # Safety
/// Implementors are `repr(C)` structs of integers and byte arrays with
/// no implicit padding: every bit pattern is valid, every byte initialised.
unsafe trait Pod: Copy {}
// SAFETY: repr(C), integers only, no implicit padding (sizes asserted above).
unsafe impl Pod for Rxnfc {}
// SAFETY: as above.
unsafe impl Pod for RawChannels {}
// SAFETY: as above.
unsafe impl Pod for RxfhHeader {}

fn zeroed<T: Pod>() -> T {
    // SAFETY: Pod types are valid for the all-zero bit pattern.
    unsafe { std::mem::zeroed() }
}

fn to_bytes<T: Pod>(v: &T, out: &mut [u8]) {
    // SAFETY: `v` is size_of::<T>() initialised bytes (Pod: no padding).
    let b = unsafe {
        std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
    };
    out[..b.len()].copy_from_slice(b);
}

fn from_bytes<T: Pod>(b: &[u8]) -> T {
    assert!(b.len() >= std::mem::size_of::<T>());
    // SAFETY: at least size_of::<T>() readable bytes; any bit pattern is a
    // valid T (Pod); read_unaligned has no alignment requirement.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) }
}

/// `struct ifreq` with `ifr_data` (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Why an ethtool call failed.
#[derive(Debug, Error)]
pub enum EthtoolError {
    /// The driver does not implement the operation (EOPNOTSUPP).
    #[error("{iface} does not support {what} (the driver has no such ethtool operation)")]
    NotSupported { iface: String, what: &'static str },
    /// ENODEV: no interface of that name in the socket's namespace.
    #[error("no network interface named {0:?}")]
    NoSuchInterface(String),
    #[error("{what} on {iface} failed: {source}")]
    Failed {
        iface: String,
        what: &'static str,
        source: io::Error,
    },
    #[error("opening a socket for ethtool requests failed: {0}")]
    Socket(io::Error),
    #[error("{0:?} is not a valid interface name (1 to 15 bytes, no NUL)")]
    BadName(String),
}

impl EthtoolError {
    /// Whether the driver lacks the operation (EOPNOTSUPP).
    pub fn is_not_supported(&self) -> bool {
        matches!(self, EthtoolError::NotSupported { .. })
    }
}

/// What `ethtool -l` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Channels {
    pub max_rx: u32,
    pub max_combined: u32,
    pub rx: u32,
    pub combined: u32,
}

impl Channels {
    /// RX queues in use: combined channels plus RX-only ones.
    pub fn rx_queues(&self) -> u32 {
        self.rx + self.combined
    }
}

/// IP version of a flow rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowFamily {
    /// `UDP_V4_FLOW` (`ethtool -N IF flow-type udp4`).
    Udp4,
    /// `UDP_V6_FLOW` (`flow-type udp6`).
    Udp6,
}

impl FlowFamily {
    /// `udp4` / `udp6`, as ethtool names them.
    pub fn name(self) -> &'static str {
        match self {
            FlowFamily::Udp4 => "udp4",
            FlowFamily::Udp6 => "udp6",
        }
    }

    /// Parses [`FlowFamily::name`].
    pub fn from_name(s: &str) -> Option<FlowFamily> {
        match s {
            "udp4" => Some(FlowFamily::Udp4),
            "udp6" => Some(FlowFamily::Udp6),
            _ => None,
        }
    }

    fn flow_type(self) -> u32 {
        match self {
            FlowFamily::Udp4 => UDP_V4_FLOW,
            FlowFamily::Udp6 => UDP_V6_FLOW,
        }
    }

    /// Byte offset of `pdst` in the flow union (`udp_ip4_spec` /
    /// `udp_ip6_spec`).
    fn pdst_offset(self) -> usize {
        match self {
            FlowFamily::Udp4 => 10,
            FlowFamily::Udp6 => 34,
        }
    }
}

/// Where a matching packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    /// To this RX queue (`action N`).
    Queue(u32),
    /// Spread by this RSS context's indirection table (`context N`).
    RssContext(u32),
}

/// An RX classification rule matching UDP packets by destination port
/// only, every other field a wildcard: `ethtool -N IF flow-type udp4
/// dst-port 4791 action 0` (or `context 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPortRule {
    pub family: FlowFamily,
    pub dst_port: u16,
    pub action: RuleAction,
}

/// Where to insert a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleLocation {
    /// The driver chooses (only if [`RuleTable::special_locations`]).
    Any,
    At(u32),
}

/// What `ETHTOOL_GRXCLSRLCNT` says about the rule table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleTable {
    /// Rules defined now.
    pub count: u32,
    /// Size of the table (0 when the driver does not say).
    pub size: u32,
    /// The driver picks locations itself ([`RuleLocation::Any`]).
    pub special_locations: bool,
}

/// An ethtool request socket for one interface.
#[derive(Debug)]
pub struct Ethtool {
    fd: OwnedFd,
    ifname: String,
    name: [libc::c_char; libc::IFNAMSIZ],
}

impl Ethtool {
    /// Opens the socket in the calling thread's network namespace; later
    /// requests address `ifname` in that namespace, whichever thread makes
    /// them.
    pub fn open(ifname: &str) -> Result<Ethtool, EthtoolError> {
        let bytes = ifname.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(EthtoolError::BadName(ifname.into()));
        }
        let mut name = [0 as libc::c_char; libc::IFNAMSIZ];
        for (d, s) in name.iter_mut().zip(bytes) {
            *d = *s as libc::c_char;
        }
        let fd = socket(libc::AF_INET)
            .or_else(|_| socket(libc::AF_UNIX))
            .map_err(EthtoolError::Socket)?;
        Ok(Ethtool {
            fd,
            ifname: ifname.into(),
            name,
        })
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// One `SIOCETHTOOL` request on `buf` (a command structure).
    fn request(&self, what: &'static str, buf: &mut [u8]) -> Result<(), EthtoolError> {
        let mut ifr = IfreqData {
            name: self.name,
            data: buf.as_mut_ptr().cast(),
            _pad: [0; 16],
        };
        // SAFETY: `ifr` is a valid ifreq whose data points to `buf`, which
        // holds a complete command structure of the kind its first word
        // names (the callers size it for what the kernel reads and writes:
        // the fixed struct plus any flexible array they announced).
        let r = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SIOCETHTOOL as libc::Ioctl,
                &mut ifr as *mut IfreqData,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => EthtoolError::NotSupported {
                    iface: self.ifname.clone(),
                    what,
                },
                Some(libc::ENODEV) => EthtoolError::NoSuchInterface(self.ifname.clone()),
                _ => EthtoolError::Failed {
                    iface: self.ifname.clone(),
                    what,
                    source: e,
                },
            });
        }
        Ok(())
    }

    fn fixed<T: Pod>(&self, what: &'static str, v: &mut T) -> Result<(), EthtoolError> {
        let mut buf = vec![0u8; std::mem::size_of::<T>()];
        to_bytes(v, &mut buf);
        self.request(what, &mut buf)?;
        *v = from_bytes(&buf);
        Ok(())
    }

    /// `ETHTOOL_GCHANNELS` (`ethtool -l`).
    pub fn channels(&self) -> Result<Channels, EthtoolError> {
        let mut c: RawChannels = zeroed();
        c.cmd = ETHTOOL_GCHANNELS;
        self.fixed("channel counts (ETHTOOL_GCHANNELS)", &mut c)?;
        Ok(Channels {
            max_rx: c.max_rx,
            max_combined: c.max_combined,
            rx: c.rx_count,
            combined: c.combined_count,
        })
    }

    /// `ETHTOOL_GRXRINGS`: the RX rings RSS and the rules may target.
    pub fn rx_rings(&self) -> Result<u32, EthtoolError> {
        let mut n: Rxnfc = zeroed();
        n.cmd = ETHTOOL_GRXRINGS;
        self.fixed("RX ring count (ETHTOOL_GRXRINGS)", &mut n)?;
        Ok(n.data as u32)
    }

    /// `ETHTOOL_GRXCLSRLCNT`: whether the interface has ntuple rules at all.
    pub fn rule_table(&self) -> Result<RuleTable, EthtoolError> {
        let mut n: Rxnfc = zeroed();
        n.cmd = ETHTOOL_GRXCLSRLCNT;
        self.fixed("ntuple rules (ETHTOOL_GRXCLSRLCNT)", &mut n)?;
        Ok(RuleTable {
            count: n.rule_cnt,
            size: (n.data & !RX_CLS_LOC_SPECIAL) as u32,
            special_locations: n.data & RX_CLS_LOC_SPECIAL != 0,
        })
    }

    /// `ETHTOOL_GRXCLSRLALL`: the locations of every rule defined.
    pub fn rule_locations(&self) -> Result<Vec<u32>, EthtoolError> {
        let count = self.rule_table()?.count as usize;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut n: Rxnfc = zeroed();
        n.cmd = ETHTOOL_GRXCLSRLALL;
        n.rule_cnt = count as u32;
        let mut buf = vec![0u8; (RULE_LOCS_OFFSET + 4 * count).max(std::mem::size_of::<Rxnfc>())];
        to_bytes(&n, &mut buf);
        self.request("listing ntuple rules (ETHTOOL_GRXCLSRLALL)", &mut buf)?;
        let n: Rxnfc = from_bytes(&buf);
        let got = (n.rule_cnt as usize).min(count);
        Ok((0..got)
            .map(|i| {
                let o = RULE_LOCS_OFFSET + 4 * i;
                u32::from_ne_bytes(buf[o..o + 4].try_into().expect("4 bytes"))
            })
            .collect())
    }

    /// `ETHTOOL_GRXCLSRULE`: the rule at `location` if it is a plain
    /// UDP-destination-port rule ([`UdpPortRule`]); `None` if there is no
    /// rule there or it matches anything else.
    pub fn rule(&self, location: u32) -> Result<Option<UdpPortRule>, EthtoolError> {
        let mut n: Rxnfc = zeroed();
        n.cmd = ETHTOOL_GRXCLSRULE;
        n.fs.location = location;
        match self.fixed("reading an ntuple rule (ETHTOOL_GRXCLSRULE)", &mut n) {
            Ok(()) => {}
            Err(EthtoolError::Failed { source, .. })
                if source.raw_os_error() == Some(libc::ENOENT) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
        Ok(parse_udp_rule(&n))
    }

    /// `ETHTOOL_SRXCLSRLINS`; returns the location the rule got.
    pub fn insert_rule(&self, rule: &UdpPortRule, at: RuleLocation) -> Result<u32, EthtoolError> {
        let mut n = udp_rule(rule);
        n.cmd = ETHTOOL_SRXCLSRLINS;
        n.fs.location = match at {
            RuleLocation::Any => RX_CLS_LOC_ANY,
            RuleLocation::At(l) => l,
        };
        self.fixed("inserting an ntuple rule (ETHTOOL_SRXCLSRLINS)", &mut n)?;
        Ok(n.fs.location)
    }

    /// `ETHTOOL_SRXCLSRLDEL`.
    pub fn delete_rule(&self, location: u32) -> Result<(), EthtoolError> {
        let mut n: Rxnfc = zeroed();
        n.cmd = ETHTOOL_SRXCLSRLDEL;
        n.fs.location = location;
        self.fixed("deleting an ntuple rule (ETHTOOL_SRXCLSRLDEL)", &mut n)
    }

    /// `ETHTOOL_GRSSH` with no buffers: `(indirection table size, key size)`.
    pub fn rss_sizes(&self) -> Result<(u32, u32), EthtoolError> {
        let mut h: RxfhHeader = zeroed();
        h.cmd = ETHTOOL_GRSSH;
        self.fixed("RSS table size (ETHTOOL_GRSSH)", &mut h)?;
        Ok((h.indir_size, h.key_size))
    }

    /// `ETHTOOL_GRSSH`: the indirection table of RSS context `context`
    /// (0: the default one, `ethtool -x`).
    pub fn rss_indirection(&self, context: u32) -> Result<Vec<u32>, EthtoolError> {
        let (size, _) = self.rss_sizes()?;
        let mut h: RxfhHeader = zeroed();
        h.cmd = ETHTOOL_GRSSH;
        h.rss_context = context;
        h.indir_size = size;
        let hdr = std::mem::size_of::<RxfhHeader>();
        let mut buf = vec![0u8; hdr + 4 * size as usize];
        to_bytes(&h, &mut buf);
        self.request("reading an RSS table (ETHTOOL_GRSSH)", &mut buf)?;
        let h: RxfhHeader = from_bytes(&buf);
        let got = h.indir_size.min(size) as usize;
        Ok((0..got)
            .map(|i| {
                let o = hdr + 4 * i;
                u32::from_ne_bytes(buf[o..o + 4].try_into().expect("4 bytes"))
            })
            .collect())
    }

    /// `ETHTOOL_SRSSH` with `ETH_RXFH_CONTEXT_ALLOC`: a new RSS context
    /// whose indirection table is `indirection` (the device's table size;
    /// see [`Ethtool::rss_sizes`]), default key and hash function. Returns
    /// its id.
    pub fn create_rss_context(&self, indirection: &[u32]) -> Result<u32, EthtoolError> {
        let mut h: RxfhHeader = zeroed();
        h.cmd = ETHTOOL_SRSSH;
        h.rss_context = ETH_RXFH_CONTEXT_ALLOC;
        h.indir_size = indirection.len() as u32;
        let hdr = std::mem::size_of::<RxfhHeader>();
        let mut buf = vec![0u8; hdr + 4 * indirection.len()];
        to_bytes(&h, &mut buf);
        for (i, q) in indirection.iter().enumerate() {
            buf[hdr + 4 * i..hdr + 4 * i + 4].copy_from_slice(&q.to_ne_bytes());
        }
        self.request("creating an RSS context (ETHTOOL_SRSSH)", &mut buf)?;
        let h: RxfhHeader = from_bytes(&buf);
        Ok(h.rss_context)
    }

    /// `ETHTOOL_SRSSH` with an empty table: deletes RSS context `context`.
    pub fn delete_rss_context(&self, context: u32) -> Result<(), EthtoolError> {
        let mut h: RxfhHeader = zeroed();
        h.cmd = ETHTOOL_SRSSH;
        h.rss_context = context;
        self.fixed("deleting an RSS context (ETHTOOL_SRSSH)", &mut h)
    }
}

fn socket(domain: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments.
    let fd = unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The rxnfc of a [`UdpPortRule`] (without cmd and location).
fn udp_rule(rule: &UdpPortRule) -> Rxnfc {
    let mut n: Rxnfc = zeroed();
    let o = rule.family.pdst_offset();
    n.fs.h_u.0[o..o + 2].copy_from_slice(&rule.dst_port.to_be_bytes());
    n.fs.m_u.0[o..o + 2].copy_from_slice(&[0xff, 0xff]);
    n.fs.flow_type = rule.family.flow_type();
    match rule.action {
        RuleAction::Queue(q) => n.fs.ring_cookie = u64::from(q),
        RuleAction::RssContext(c) => {
            n.fs.flow_type |= FLOW_RSS;
            n.fs.ring_cookie = 0;
            n.rule_cnt = c;
        }
    }
    n.flow_type = n.fs.flow_type;
    n
}

/// The [`UdpPortRule`] an rxnfc holds, if it is exactly one.
fn parse_udp_rule(n: &Rxnfc) -> Option<UdpPortRule> {
    let ft = n.fs.flow_type;
    if ft & (FLOW_EXT | FLOW_MAC_EXT) != 0 {
        return None;
    }
    let family = match ft & !FLOW_RSS {
        UDP_V4_FLOW => FlowFamily::Udp4,
        UDP_V6_FLOW => FlowFamily::Udp6,
        _ => return None,
    };
    let o = family.pdst_offset();
    let mask = &n.fs.m_u.0;
    // Only the destination port is matched: every other mask byte is 0.
    if mask[o..o + 2] != [0xff, 0xff]
        || mask
            .iter()
            .enumerate()
            .any(|(i, &b)| (i < o || i >= o + 2) && b != 0)
    {
        return None;
    }
    let dst_port = u16::from_be_bytes([n.fs.h_u.0[o], n.fs.h_u.0[o + 1]]);
    let action = if ft & FLOW_RSS != 0 {
        RuleAction::RssContext(n.rule_cnt)
    } else {
        RuleAction::Queue((n.fs.ring_cookie & 0xffff_ffff) as u32)
    };
    Some(UdpPortRule {
        family,
        dst_port,
        action,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_round_trip_through_the_uapi_layout() {
        for rule in [
            UdpPortRule {
                family: FlowFamily::Udp4,
                dst_port: 4791,
                action: RuleAction::Queue(2),
            },
            UdpPortRule {
                family: FlowFamily::Udp6,
                dst_port: 4791,
                action: RuleAction::RssContext(3),
            },
        ] {
            let n = udp_rule(&rule);
            assert_eq!(parse_udp_rule(&n), Some(rule));
            let mut b = vec![0u8; 192];
            to_bytes(&n, &mut b);
            // flow_type at 16 (fs), the port in network order in h_u.
            let o = 20 + rule.family.pdst_offset();
            assert_eq!(&b[o..o + 2], &4791u16.to_be_bytes());
        }
        let mut n = udp_rule(&UdpPortRule {
            family: FlowFamily::Udp4,
            dst_port: 4791,
            action: RuleAction::Queue(0),
        });
        n.fs.m_u.0[4] = 0xff; // also matches the destination address
        assert_eq!(parse_udp_rule(&n), None);
    }

    #[test]
    fn real_ioctls_map_errors() {
        // `lo` has no ethtool channel or rxnfc operations: EOPNOTSUPP
        // becomes NotSupported (no privileges needed to ask).
        let e = Ethtool::open("lo").unwrap();
        let err = e.rule_table().unwrap_err();
        assert!(err.is_not_supported(), "{err}");
        assert!(err.to_string().contains("does not support"), "{err}");
        assert!(e.channels().unwrap_err().is_not_supported());
        let e = Ethtool::open("nosuchif0").unwrap();
        assert!(matches!(
            e.channels(),
            Err(EthtoolError::NoSuchInterface(n)) if n == "nosuchif0"
        ));
        assert!(matches!(
            Ethtool::open("a-name-longer-than-15"),
            Err(EthtoolError::BadName(_))
        ));
    }
}
