//! What the CM agent counts (named for `roce-xdp stats`).

/// Counters of one [`super::CmAgent`]. Every received MAD is counted once
/// in `mads_received` and then in exactly one of: `malformed`,
/// `unmatched`, `duplicates`, `stale`, `backlog_refused`,
/// `half_open_refused`, `connections_refused`, `no_listener`,
/// `unsupported` or `accepted_mads` (a MAD that moved a connection or was
/// answered as its state asks): [`CmCounters::received_accounted`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmCounters {
    /// MADs given to `handle_mad`.
    pub mads_received: u64,
    /// MADs that changed or were answered by a connection's state machine.
    pub accepted_mads: u64,
    /// MADs handed out by `poll_transmit` (retransmissions included).
    pub mads_sent: u64,
    /// Retransmissions of REQ, REP, DREQ and SIDR_REQ after a timeout.
    pub retransmissions: u64,
    /// Received MADs that are not CM MADs this core handles (short, wrong
    /// base/class version, class, method or attribute).
    pub malformed: u64,
    /// Received MADs for no connection (or one in a state that ignores
    /// them), dropped or answered as cm.c does.
    pub unmatched: u64,
    /// Received duplicates (a REQ, REP, DREQ, RTU or SIDR_REQ seen before).
    pub duplicates: u64,
    /// REQs / REPs refused as stale (IBA 12.9.8.3.1: REJ reason 10).
    pub stale: u64,
    /// REJs sent.
    pub rejects_sent: u64,
    /// REJs received that ended a connection.
    pub rejects_received: u64,
    /// REQs refused because `max_half_open` passive connections were
    /// already waiting for their RTU (REJ "no resources").
    pub half_open_refused: u64,
    /// REQs refused because the listener's backlog was full.
    pub backlog_refused: u64,
    /// REQs and SIDR_REQs for a service ID nobody listens on (REJ reason
    /// 8 / SIDR_REP status 1).
    pub no_listener: u64,
    /// Connections that ran out of retries (REQ, REP, DREQ, SIDR_REQ).
    pub timeouts: u64,
    /// Connections established.
    pub established: u64,
    /// MRAs received.
    pub mras_received: u64,
    /// Connections that entered timewait.
    pub timewaits: u64,
    /// REQs / SIDR_REQs refused because the agent holds
    /// `max_connections` already (REJ "no resources" / dropped).
    pub connections_refused: u64,
    /// REQs for a transport this core does not run (RD, XRC): REJ 9.
    pub unsupported: u64,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
    /// MADs dropped because the transmit queue was full.
    pub tx_dropped: u64,
}

impl CmCounters {
    /// Every counter with the name `roce-xdp stats` shows it under (a C
    /// string, so the drop-in librdmacm hands the names out as they are).
    pub fn named(&self) -> [(&'static core::ffi::CStr, u64); 21] {
        [
            (c"mads_received", self.mads_received),
            (c"mads_accepted", self.accepted_mads),
            (c"mads_sent", self.mads_sent),
            (c"retransmissions", self.retransmissions),
            (c"malformed", self.malformed),
            (c"unmatched", self.unmatched),
            (c"duplicates", self.duplicates),
            (c"stale", self.stale),
            (c"rejects_sent", self.rejects_sent),
            (c"rejects_received", self.rejects_received),
            (c"half_open_refused", self.half_open_refused),
            (c"backlog_refused", self.backlog_refused),
            (c"no_listener", self.no_listener),
            (c"timeouts", self.timeouts),
            (c"established", self.established),
            (c"mras_received", self.mras_received),
            (c"timewaits", self.timewaits),
            (c"connections_refused", self.connections_refused),
            (c"unsupported", self.unsupported),
            (c"events_dropped", self.events_dropped),
            (c"tx_dropped", self.tx_dropped),
        ]
    }

    /// The sum of the counters every received MAD ends in exactly one of:
    /// always equal to `mads_received`.
    pub fn received_accounted(&self) -> u64 {
        self.accepted_mads
            + self.malformed
            + self.unmatched
            + self.duplicates
            + self.stale
            + self.backlog_refused
            + self.half_open_refused
            + self.connections_refused
            + self.no_listener
            + self.unsupported
    }
}
