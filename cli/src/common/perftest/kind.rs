//! The six perftest-style tests.

/// Which test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    WriteBw,
    ReadBw,
    SendBw,
    WriteLat,
    ReadLat,
    SendLat,
    AtomicBw,
    AtomicLat,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::WriteBw,
        Kind::ReadBw,
        Kind::SendBw,
        Kind::WriteLat,
        Kind::ReadLat,
        Kind::SendLat,
        Kind::AtomicBw,
        Kind::AtomicLat,
    ];

    /// The command name, e.g. `write-bw`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::WriteBw => "write-bw",
            Kind::ReadBw => "read-bw",
            Kind::SendBw => "send-bw",
            Kind::WriteLat => "write-lat",
            Kind::ReadLat => "read-lat",
            Kind::SendLat => "send-lat",
            Kind::AtomicBw => "atomic-bw",
            Kind::AtomicLat => "atomic-lat",
        }
    }

    /// perftest's name of the verb.
    pub fn verb(self) -> &'static str {
        match self {
            Kind::WriteBw | Kind::WriteLat => "RDMA_Write",
            Kind::ReadBw | Kind::ReadLat => "RDMA_Read",
            Kind::SendBw | Kind::SendLat => "Send",
            Kind::AtomicBw | Kind::AtomicLat => "Atomic FETCH_AND_ADD",
        }
    }

    pub fn is_latency(self) -> bool {
        matches!(
            self,
            Kind::WriteLat | Kind::ReadLat | Kind::SendLat | Kind::AtomicLat
        )
    }

    /// Atomics move 8 bytes, whatever `-s` says (as perftest's).
    pub fn is_atomic(self) -> bool {
        matches!(self, Kind::AtomicBw | Kind::AtomicLat)
    }
}

impl Kind {
    /// perftest's test of the same name (its exchange order).
    pub fn test(self) -> engine::oob::perftest::Test {
        use engine::oob::perftest::Test;
        match self {
            Kind::WriteBw => Test::WriteBw,
            Kind::ReadBw => Test::ReadBw,
            Kind::SendBw => Test::SendBw,
            Kind::AtomicBw => Test::AtomicBw,
            Kind::WriteLat => Test::WriteLat,
            Kind::ReadLat => Test::ReadLat,
            Kind::SendLat => Test::SendLat,
            Kind::AtomicLat => Test::AtomicLat,
        }
    }

    /// The rights a region needs for this test: what the peer does to it
    /// (WRITE, READ, atomics) and local writes (READ responses, atomic
    /// results and SENDs land in it). Nothing more.
    pub fn access(self) -> engine::rc::Access {
        use engine::rc::Access;
        Access::LOCAL_WRITE
            | match self {
                Kind::WriteBw | Kind::WriteLat => Access::REMOTE_WRITE,
                Kind::ReadBw | Kind::ReadLat => Access::REMOTE_READ,
                Kind::AtomicBw | Kind::AtomicLat => Access::REMOTE_ATOMIC,
                Kind::SendBw | Kind::SendLat => Access::NONE,
            }
    }

    /// The tag a roce-xdp client puts in its keys' SRQ number (which
    /// perftest ignores for RC), so `roce-xdp serve` knows the test.
    pub fn tag(self) -> u32 {
        TAG_BASE | Kind::ALL.iter().position(|&k| k == self).unwrap_or(0) as u32
    }

    /// The test a key's SRQ number names, if a roce-xdp client sent it.
    pub fn from_tag(srqn: u32) -> Option<Kind> {
        (srqn & !0xff == TAG_BASE)
            .then(|| Kind::ALL.get((srqn & 0xff) as usize).copied())
            .flatten()
    }
}

/// `"RX"` and a zero byte, then the index into [`Kind::ALL`].
const TAG_BASE: u32 = 0x5258_0000;
