//! Per-QP and per-endpoint counters, named as rxe (and `rdma statistic`)
//! users know them, plus a few of this engine's own.

macro_rules! counters {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident,)* }) => {
        $(#[$m])*
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fm])* pub $field: u64,)*
        }

        impl $name {
            /// Names of the counters, in display order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// `(name, value)` pairs in display order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
                [$((stringify!($field), self.$field)),*].into_iter()
            }

            /// Add every counter of `other` to `self`.
            pub fn accumulate(&mut self, other: &$name) {
                $(self.$field += other.$field;)*
            }

            /// Take every counter of `other` (a part of `self`) back out.
            pub fn deduct(&mut self, other: &$name) {
                $(self.$field = self.$field.wrapping_sub(other.$field);)*
            }
        }
    };
}

counters! {
    /// Transport counters of one QP, or their sum over an endpoint. A QP
    /// keeps them as [`QpCounters`].
    ///
    /// Aligned to a cache line: its 304 bytes take 5 lines, never 6.
    #[repr(align(64))]
    Counters {
        /// RoCE packets transmitted (requests, responses, ACKs, NAKs).
        sent_pkts,
        /// RoCE packets received and accepted for a QP.
        rcvd_pkts,
        /// Responder: requests with a PSN before the expected PSN.
        duplicate_request,
        /// Responder: requests with a PSN after the expected PSN.
        out_of_seq_request,
        /// Requester: NAK PSN sequence error received.
        rcvd_seq_err,
        /// Requester: RNR NAK received.
        rcvd_rnr_err,
        /// Responder: RNR NAK sent.
        send_rnr_err,
        /// Requester: retry_cnt exhausted.
        retry_exceeded_err,
        /// Requester: rnr_retry exhausted.
        retry_rnr_exceeded_err,
        /// Requester: go-back-N retries started (timeouts, NAKs, implied NAKs).
        completer_retry_err,
        /// Requester: request packets sent again by go-back-N.
        retransmitted_packets,
        /// Responder: NAKs sent (sequence error, access, invalid request, operational).
        naks_sent,
        /// Responder: RDMA WRITEs, READs and atomics refused because the
        /// QP's access flags (`QpAttr::access`, verbs `qp_access_flags`)
        /// lack the right they need (rxe check_op_valid): each NAKed
        /// invalid request, the QP to error, nothing executed.
        qp_access_violation,
        /// Requester: local ACK timeouts that fired.
        timeouts,
        /// Responder: ACK packets sent (each may cover many requests).
        acks_sent,
        /// Requester: ACKs/responses that were stale or duplicated and ignored.
        duplicate_response,
        /// Requester: ACKs, NAKs and responses naming a PSN this QP has
        /// not sent (rxe's completer check_psn), dropped before they
        /// acknowledge anything.
        dropped_unsent_psn,
        /// Requester: responses whose kind does not fit the request at
        /// their PSN (an atomic ACK at a SEND's PSN, a READ response at a
        /// WRITE's, a length or AETH that does not fit; rxe check_ack),
        /// dropped before they acknowledge anything.
        dropped_bad_response,
        /// Responder: duplicate READ / atomic requests that match none of
        /// the responder resources (the last `max_dest_rd_atomic` READs
        /// and atomics; rxe duplicate_request, find_resource), dropped
        /// unexecuted and unanswered.
        dropped_duplicate_rd_atomic,
        /// Frames dropped: ICRC mismatch.
        dropped_bad_icrc,
        /// Frames dropped: destination QP unknown.
        dropped_unknown_qp,
        /// Frames dropped: source/destination IP not the QP's connected peer
        /// (rxe's check_addr), or the UDP source port not the peer's when
        /// the QP knows it; CNPs included.
        dropped_wrong_peer,
        /// Frames dropped: BTH P_Key does not match the QP's (rxe's
        /// check_keys, `bad_pkey_cntr`); CNPs included.
        dropped_bad_pkey,
        /// UD: datagrams dropped because their DETH Q_Key is not the QP's
        /// (rxe's check_keys, `qkey_viol_cntr`; IBA 10.2.5).
        dropped_bad_qkey,
        /// UD: datagrams, and UC: messages, dropped because the QP had no
        /// receive posted (no RNR on UD or UC: IBA 9.7.5.2.8's class D,
        /// rxe `RESPST_ERR_RNR`).
        dropped_no_receive,
        /// UC: messages the responder dropped (a packet of it lost,
        /// out of order, refused, or no receive posted: `rc/uc.rs`),
        /// each counted once; the QP stays.
        uc_messages_dropped,
        /// UC: RDMA WRITEs dropped for a bad R_Key, range or right (no
        /// NAK on UC: IBA class E, rxe `RESPST_ERR_RKEY_VIOLATION`).
        uc_rkey_violations,
        /// UD: sends longer than the QP's MTU, completed successfully
        /// without a packet (IBA C10-93.1.1, as rxe's requester).
        ud_send_too_long,
        /// Frames dropped: not a well-formed RoCE v2 frame, or a packet the QP
        /// cannot accept in its state.
        dropped_malformed,
        /// Responder: in-order requests dropped because its answer queue or
        /// READ/atomic resources were full (the requester retransmits).
        dropped_busy,
        /// Frames not emitted because the caller's buffer was too small.
        tx_buffer_too_small,
        /// Requester: times a request packet never sent before waited
        /// because the endpoint's QPs had their in-flight limit
        /// (`EndpointConfig::max_inflight_packets`) outstanding. Counted
        /// for the endpoint only (the limit is the endpoint's): 0 in a
        /// QP's own counters.
        tx_inflight_waits,
        /// Work completions dropped because the CQ was full.
        cq_overflow,
        /// CNPs received (handed to congestion control).
        cnp_received,
        /// Notification point: RoCE packets received with IP ECN = CE
        /// (NVIDIA's name).
        np_ecn_marked_roce_packets,
        /// Notification point: CNPs sent (at most one per QP per
        /// `min_time_between_cnps`).
        np_cnp_sent,
        /// Reaction point: CNPs that reduced the QP's rate.
        rp_cnp_handled,
        /// Reaction point: CNPs ignored (inside the rate-reduce monitor
        /// period, or DCQCN off).
        rp_cnp_ignored,
    }
}

/// A QP's counters as the QP keeps them: the three that a packet of the
/// normal path changes (`sent_pkts`, `rcvd_pkts`, `acks_sent`) inline, in
/// 32 bytes with the pointer to the rest; every other one (errors,
/// retries, drops, congestion) in a [`Counters`] allocated the first time
/// one of them counts ([`QpCounters::rest`]), as the QP's DCQCN state is
/// at its first CNP. While nothing goes wrong, a QP holds 32 bytes of
/// counters instead of 256, and the statistics' sum, which reads the
/// counters of every QP a packet touched (`endpoint/qp_table.rs`,
/// `CounterSum`), reads them from the QP's last line instead of four.
/// The allocation happens once in a QP's life (its 256 bytes stay until
/// the QP is destroyed), never per packet.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QpCounters {
    /// RoCE packets transmitted (as [`Counters::sent_pkts`]).
    pub sent_pkts: u64,
    /// RoCE packets received and accepted (as [`Counters::rcvd_pkts`]).
    pub rcvd_pkts: u64,
    /// Responder: ACK packets sent (as [`Counters::acks_sent`]).
    pub acks_sent: u64,
    /// Every other counter; its three fields above stay 0.
    rest: Option<Box<Counters>>,
}

impl QpCounters {
    /// The counters other than the three kept inline, allocated the first
    /// time one of them counts.
    #[inline]
    pub fn rest(&mut self) -> &mut Counters {
        self.rest.get_or_insert_with(Self::first_rest)
    }

    #[cold]
    #[inline(never)]
    fn first_rest() -> Box<Counters> {
        Box::default()
    }

    /// Whether any counter other than the three inline ones has counted
    /// (the rest is allocated).
    pub fn has_rest(&self) -> bool {
        self.rest.is_some()
    }

    /// All of them, as one [`Counters`].
    pub fn snapshot(&self) -> Counters {
        let mut c = Counters::default();
        self.add_to(&mut c);
        c
    }

    /// Add every counter to `sum`.
    #[inline]
    pub fn add_to(&self, sum: &mut Counters) {
        sum.sent_pkts += self.sent_pkts;
        sum.rcvd_pkts += self.rcvd_pkts;
        sum.acks_sent += self.acks_sent;
        if let Some(rest) = &self.rest {
            sum.accumulate(rest);
        }
    }

    /// Take every counter back out of `sum` (which holds them).
    #[inline]
    pub fn take_from(&self, sum: &mut Counters) {
        sum.sent_pkts = sum.sent_pkts.wrapping_sub(self.sent_pkts);
        sum.rcvd_pkts = sum.rcvd_pkts.wrapping_sub(self.rcvd_pkts);
        sum.acks_sent = sum.acks_sent.wrapping_sub(self.acks_sent);
        if let Some(rest) = &self.rest {
            sum.deduct(rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qps_counters_allocate_the_rest_at_its_first_count() {
        let mut q = QpCounters::default();
        q.sent_pkts += 3;
        q.rcvd_pkts += 2;
        q.acks_sent += 1;
        assert!(!q.has_rest());
        let c = q.snapshot();
        assert_eq!((c.sent_pkts, c.rcvd_pkts, c.acks_sent), (3, 2, 1));
        assert_eq!(c.iter().map(|(_, v)| v).sum::<u64>(), 6);
        q.rest().naks_sent += 1;
        q.rest().dropped_busy += 2;
        assert!(q.has_rest());
        let mut sum = Counters {
            sent_pkts: 10,
            naks_sent: 5,
            ..Default::default()
        };
        q.add_to(&mut sum);
        assert_eq!((sum.sent_pkts, sum.naks_sent, sum.dropped_busy), (13, 6, 2));
        q.take_from(&mut sum);
        assert_eq!(
            sum,
            Counters {
                sent_pkts: 10,
                naks_sent: 5,
                ..Default::default()
            }
        );
        // The QP keeps 32 bytes of them.
        #[cfg(target_pointer_width = "64")]
        assert_eq!(core::mem::size_of::<QpCounters>(), 32);
    }

    #[test]
    fn names_match_fields_and_accumulate() {
        let mut a = Counters {
            sent_pkts: 2,
            naks_sent: 1,
            ..Default::default()
        };
        let b = Counters {
            sent_pkts: 3,
            ..Default::default()
        };
        a.accumulate(&b);
        let pairs: Vec<_> = a.iter().collect();
        assert_eq!(pairs[0], ("sent_pkts", 5));
        assert!(pairs.contains(&("naks_sent", 1)));
        assert_eq!(Counters::NAMES.len(), pairs.len());
    }

    #[test]
    fn every_receive_side_drop_has_a_named_counter() {
        // The names `roce-xdp stats` shows (docs/security.md).
        for name in [
            "dropped_wrong_peer",
            "dropped_bad_pkey",
            "dropped_unsent_psn",
            "dropped_bad_response",
            "dropped_duplicate_rd_atomic",
            "dropped_busy",
            "dropped_unknown_qp",
            "dropped_malformed",
            "dropped_bad_icrc",
        ] {
            assert!(Counters::NAMES.contains(&name), "{name}");
        }
    }
}
