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

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
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
