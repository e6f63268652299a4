//! Scatter/gather lists and inline data, packet by packet: SEND, WRITE
//! and READ with random lists of 1..=32 entries (lengths from 0, entry
//! boundaries anywhere in a packet), checked byte for byte against the
//! flat model (`sgl_model`); zero-SGE requests; inline data; and the
//! refusals: too many entries, an entry beyond its region or with an
//! unknown key, a receive list too short, a list whose region went away
//! after the post (bad receive entries: `bad_receive.rs`).

use core::net::{IpAddr, Ipv4Addr};

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp, FIRST_QPN};
use proto::rc::{
    Access, MrKeys, Mtu, QpInitAttr, QpState, SendOp, SendWr, Sge, SgeCaps, VerbsError, WcOpcode,
    WcStatus, MAX_INLINE_DATA, MAX_SGE,
};
use proto::time::Instant;

use crate::sgl_model::{gather, pattern, place, scatter, split, Rand};
use crate::support::{opts_mtu, Pair, IOVA_A, IOVA_B, MAC_A, MAC_B, MR_LEN};

/// Capacities the tests' QPs are made with: rxe's largest.
const CAPS: SgeCaps = SgeCaps {
    max_send_sge: MAX_SGE,
    max_recv_sge: MAX_SGE,
    max_inline_data: MAX_INLINE_DATA,
};

/// A and B, each QP made with `caps` before it is connected at path MTU
/// `mtu`; each side has a 1 MiB region with every right, A's filled
/// with pattern 1, B's with pattern 2.
fn pair(mtu: Mtu, caps: SgeCaps) -> Pair {
    let cfg = |mac, ip| EndpointConfig {
        local_mac: mac,
        local_ip: IpAddr::V4(ip),
        ..Default::default()
    };
    let (ip_a, ip_b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let mut a = Endpoint::new(cfg(MAC_A, ip_a));
    let mut b = Endpoint::new(cfg(MAC_B, ip_b));
    let make = |ep: &mut Endpoint| {
        let cq = ep.create_cq(1024);
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 64,
            max_recv_wr: 64,
            sq_sig_all: false,
            srq: None,
        };
        let qpn = ep.create_qp_numbered(FIRST_QPN, init).unwrap();
        ep.set_qp_sge_caps(qpn, caps).unwrap();
        (cq, qpn)
    };
    let ((cq_a, qa), (cq_b, qb)) = (make(&mut a), make(&mut b));
    let o: ConnectOptions = opts_mtu(mtu);
    let remote = |qpn, mac, ip| RemoteQp {
        qpn,
        psn: o.sq_psn,
        mac,
        ip: IpAddr::V4(ip),
    };
    a.connect(qa, &remote(qb, MAC_B, ip_b), &o).unwrap();
    b.connect(qb, &remote(qa, MAC_A, ip_a), &o).unwrap();
    let region = |ep: &mut Endpoint, iova, seed| {
        ep.reg_mr(Box::new(pattern(seed, MR_LEN)), iova, Access::ALL)
            .unwrap()
    };
    let (mr_a, mr_b) = (region(&mut a, IOVA_A, 1), region(&mut b, IOVA_B, 2));
    Pair {
        a,
        b,
        qa,
        qb,
        cq_a,
        cq_b,
        mr_a,
        mr_b,
        now: Instant::ZERO,
    }
}

/// A's request `op` with no data of its own (the list carries it).
fn wr(p: &Pair, wr_id: u64, op: SendOp, remote_off: u64) -> SendWr {
    let mut w = SendWr::new(wr_id, op, Sge::default());
    w.remote_addr = IOVA_B + remote_off;
    w.rkey = p.mr_b.rkey;
    w.imm = 0xC0DE_0000 | wr_id as u32;
    w
}

fn region_a(p: &Pair) -> Vec<u8> {
    p.read_a(IOVA_A, MR_LEN)
}

fn region_b(p: &Pair) -> Vec<u8> {
    p.read_b(IOVA_B, MR_LEN)
}

#[test]
fn random_lists_gather_and_scatter_byte_exact_for_send_write_and_read() {
    let mut r = Rand(0x5_6_1);
    for mtu in [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096] {
        let mut p = pair(mtu, CAPS);
        for round in 0..24u64 {
            let (mut want_a, mut want_b) = (region_a(&p), region_b(&p));
            let total = match round % 4 {
                0 => r.below(64) as u32,
                1 => r.below(mtu.bytes() as u64 * 3) as u32,
                _ => r.below(20_000) as u32,
            };
            let n_send = 1 + r.below(u64::from(MAX_SGE)) as usize;
            let n_recv = 1 + r.below(u64::from(MAX_SGE)) as usize;
            let (mut ca, mut cb) = (0u64, 0u64);
            let lens = split(&mut r, total, n_send);
            let local = place(&mut r, p.mr_a.lkey, IOVA_A, &mut ca, &lens);
            let op = [SendOp::Send, SendOp::Write, SendOp::Read][(round % 3) as usize];
            let remote_off = 0x8_0000 + r.below(4096);
            let what = format!("{mtu:?} round {round} {op:?} {total} bytes, {n_send} SGEs");
            match op {
                SendOp::Send => {
                    // A receive list of `n_recv` entries, some slack after.
                    let slack = r.below(100) as u32;
                    let lens = split(&mut r, total + slack, n_recv);
                    let recv = place(&mut r, p.mr_b.lkey, IOVA_B, &mut cb, &lens);
                    p.b.post_recv_sgl(p.qb, round, &recv).unwrap();
                    let data = gather(&want_a, IOVA_A, &local);
                    scatter(&mut want_b, IOVA_B, &recv, &data);
                }
                SendOp::Write => {
                    let data = gather(&want_a, IOVA_A, &local);
                    let at = remote_off as usize;
                    want_b[at..at + data.len()].copy_from_slice(&data);
                }
                _ => {
                    let at = remote_off as usize;
                    let data = want_b[at..at + total as usize].to_vec();
                    scatter(&mut want_a, IOVA_A, &local, &data);
                }
            }
            p.a.post_send_sgl(p.qa, wr(&p, round, op, remote_off), &local)
                .unwrap();
            p.settle();
            let wa = p.wcs_a();
            assert_eq!(wa.len(), 1, "{what}: {wa:?}");
            assert_eq!(wa[0].status, WcStatus::Success, "{what}");
            assert_eq!(wa[0].byte_len, total, "{what}");
            if op == SendOp::Send {
                let wb = p.wcs_b();
                assert_eq!(wb.len(), 1, "{what}: {wb:?}");
                assert_eq!((wb[0].wr_id, wb[0].status), (round, WcStatus::Success));
                assert_eq!(wb[0].byte_len, total, "{what}: byte_len is the total");
            }
            assert!(region_a(&p) == want_a, "{what}: A's region");
            assert!(region_b(&p) == want_b, "{what}: B's region");
        }
    }
}

#[test]
fn zero_sge_requests_complete_with_zero_bytes() {
    let mut p = pair(Mtu::Mtu1024, CAPS);
    let (a0, b0) = (region_a(&p), region_b(&p));
    // A zero-length SEND into a receive with no SGE; a WRITE with
    // immediate and no data into another (as NCCL posts them).
    p.b.post_recv_sgl(p.qb, 1, &[]).unwrap();
    p.b.post_recv_sgl(p.qb, 2, &[]).unwrap();
    p.a.post_send_sgl(p.qa, wr(&p, 10, SendOp::Send, 0), &[])
        .unwrap();
    p.a.post_send_sgl(p.qa, wr(&p, 11, SendOp::WriteWithImm, 0), &[])
        .unwrap();
    // A zero-length WRITE and READ validate no R_Key (IBTA C9-88).
    let mut w = wr(&p, 12, SendOp::Write, 0);
    w.rkey = 0xDEAD;
    p.a.post_send_sgl(p.qa, w, &[]).unwrap();
    p.a.post_send_sgl(p.qa, wr(&p, 13, SendOp::Read, 0), &[])
        .unwrap();
    p.settle();
    let wa: Vec<_> = p
        .wcs_a()
        .iter()
        .map(|w| (w.wr_id, w.status, w.byte_len))
        .collect();
    let ok = WcStatus::Success;
    assert_eq!(wa, [(10, ok, 0), (11, ok, 0), (12, ok, 0), (13, ok, 0)]);
    let wb: Vec<_> = p
        .wcs_b()
        .iter()
        .map(|w| (w.wr_id, w.status, w.opcode, w.byte_len, w.imm))
        .collect();
    assert_eq!(
        wb,
        [
            (1, ok, WcOpcode::Recv, 0, None),
            (2, ok, WcOpcode::RecvRdmaWithImm, 0, Some(0xC0DE_000B)),
        ]
    );
    assert!(region_a(&p) == a0 && region_b(&p) == b0);
}

#[test]
fn a_zero_sge_receive_takes_only_a_zero_length_message() {
    let mut p = pair(Mtu::Mtu1024, CAPS);
    p.b.post_recv_sgl(p.qb, 1, &[]).unwrap();
    let local = [Sge {
        lkey: p.mr_a.lkey,
        addr: IOVA_A,
        length: 1,
    }];
    p.a.post_send_sgl(p.qa, wr(&p, 10, SendOp::Send, 0), &local)
        .unwrap();
    p.settle();
    let wb = p.wcs_b();
    assert_eq!((wb[0].wr_id, wb[0].status), (1, WcStatus::LocalLengthError));
    let wa = p.wcs_a();
    assert_eq!(wa[0].status, WcStatus::RemoteInvalidRequest);
}

#[test]
fn a_receive_list_too_short_is_a_local_length_error() {
    let mut p = pair(Mtu::Mtu1024, CAPS);
    let b0 = region_b(&p);
    let recv: Vec<Sge> = (0..4)
        .map(|k| Sge {
            lkey: p.mr_b.lkey,
            addr: IOVA_B + k * 1000,
            length: 500,
        })
        .collect();
    p.b.post_recv_sgl(p.qb, 7, &recv).unwrap();
    let local = [
        Sge {
            lkey: p.mr_a.lkey,
            addr: IOVA_A,
            length: 1500,
        },
        Sge {
            lkey: p.mr_a.lkey,
            addr: IOVA_A + 4096,
            length: 1000,
        },
    ];
    p.a.post_send_sgl(p.qa, wr(&p, 3, SendOp::Send, 0), &local)
        .unwrap();
    p.settle();
    let wb = p.wcs_b();
    assert_eq!((wb[0].wr_id, wb[0].status), (7, WcStatus::LocalLengthError));
    let wa = p.wcs_a();
    assert_eq!(wa[0].status, WcStatus::RemoteInvalidRequest);
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error));
    // The 2000 bytes the list holds took the first packet (1024 bytes);
    // nothing landed outside the list's entries.
    let now = region_b(&p);
    for k in 0..4u64 {
        let (s, e) = ((k * 1000 + 500) as usize, ((k + 1) * 1000) as usize);
        assert!(now[s..e] == b0[s..e], "gap after entry {k}");
    }
    assert!(now[4000..] == b0[4000..]);
}

#[test]
fn more_sges_than_the_qp_was_made_for_is_invalid() {
    let caps = SgeCaps {
        max_send_sge: 4,
        max_recv_sge: 3,
        max_inline_data: 0,
    };
    let mut p = pair(Mtu::Mtu1024, caps);
    let sge = |k: u64| Sge {
        lkey: p.mr_a.lkey,
        addr: IOVA_A + k * 64,
        length: 8,
    };
    let five: Vec<Sge> = (0..5).map(sge).collect();
    let four: Vec<Sge> = (0..4).map(sge).collect();
    let w = wr(&p, 1, SendOp::Write, 0);
    assert!(matches!(
        p.a.post_send_sgl(p.qa, w, &five),
        Err(VerbsError::InvalidArgument(_))
    ));
    p.a.post_send_sgl(p.qa, w, &four).unwrap();
    let rsge = |k: u64| Sge {
        lkey: p.mr_b.lkey,
        addr: IOVA_B + k * 64,
        length: 8,
    };
    let four_b: Vec<Sge> = (0..4).map(rsge).collect();
    assert!(matches!(
        p.b.post_recv_sgl(p.qb, 1, &four_b),
        Err(VerbsError::InvalidArgument(_))
    ));
    p.b.post_recv_sgl(p.qb, 1, &four_b[..3]).unwrap();
    // No inline data on this QP.
    let s = wr(&p, 2, SendOp::Send, 0);
    assert!(matches!(
        p.a.post_send_inline(p.qa, s, b"x"),
        Err(VerbsError::InvalidArgument(_))
    ));
    // A QP made with default capacities takes one SGE a request.
    let mut q = pair(Mtu::Mtu1024, SgeCaps::default());
    let two: Vec<Sge> = (0..2)
        .map(|k| Sge {
            lkey: q.mr_a.lkey,
            addr: IOVA_A + k * 64,
            length: 8,
        })
        .collect();
    let w = wr(&q, 1, SendOp::Write, 0);
    assert!(matches!(
        q.a.post_send_sgl(q.qa, w, &two),
        Err(VerbsError::InvalidArgument(_))
    ));
    q.a.post_send_sgl(q.qa, w, &two[..1]).unwrap();
    q.settle();
    assert_eq!(q.wcs_a()[0].status, WcStatus::Success);
    // Capacities beyond rxe's, or on a connected QP, are refused.
    let big = SgeCaps {
        max_send_sge: MAX_SGE + 1,
        ..CAPS
    };
    let mut e = Endpoint::new(EndpointConfig::default());
    let cq = e.create_cq(4);
    let qpn = e
        .create_qp(QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            ..QpInitAttr::default()
        })
        .unwrap();
    assert!(matches!(
        e.set_qp_sge_caps(qpn, big),
        Err(VerbsError::InvalidArgument(_))
    ));
    let big = SgeCaps {
        max_inline_data: MAX_INLINE_DATA + 1,
        ..CAPS
    };
    assert!(matches!(
        e.set_qp_sge_caps(qpn, big),
        Err(VerbsError::InvalidArgument(_))
    ));
    assert_eq!(
        q.a.set_qp_sge_caps(q.qa, CAPS),
        Err(VerbsError::InvalidState)
    );
}

/// As rxe (`validate_send_wr` looks at no key; rxe_mr.c `copy_data`
/// looks each entry up when the request runs), a send list with a bad
/// entry anywhere (an unknown key, a key of another PD, a range past its
/// region) is posted, and its request fails when it runs: a SEND or WRITE
/// with a local QP operation error and no packet (rxe_req.c
/// `finish_packet`: `copy_data`'s `-EINVAL`), a READ with a local
/// protection error when its answer reaches the entry (rxe_comp.c
/// `do_read`). The QP goes to error and flushes the request behind it;
/// nothing lands at B, and A's bytes outside the READ's good entries
/// stay.
#[test]
fn a_bad_entry_anywhere_in_a_send_list_is_posted_and_fails_its_request() {
    for bad_kind in 0..3 {
        for at in [0usize, 3, 7] {
            for op in [SendOp::Send, SendOp::Write, SendOp::Read] {
                let what = format!("bad entry kind {bad_kind} at {at}, {op:?}");
                let mut p = pair(Mtu::Mtu1024, CAPS);
                let other =
                    p.a.reg_mr_in(7, Box::new(vec![0x33u8; 64]), 0x900_0000, Access::ALL)
                        .unwrap();
                let bad = match bad_kind {
                    // Past the end of A's region.
                    0 => Sge {
                        lkey: p.mr_a.lkey,
                        addr: IOVA_A + MR_LEN as u64 - 4,
                        length: 8,
                    },
                    // No region has this key.
                    1 => Sge {
                        lkey: p.mr_a.lkey ^ 0x5A5A_0000,
                        addr: IOVA_A,
                        length: 8,
                    },
                    // A region of another PD than the QP's.
                    _ => Sge {
                        lkey: other.lkey,
                        addr: 0x900_0000,
                        length: 8,
                    },
                };
                let mut list: Vec<Sge> = (0..8)
                    .map(|k| Sge {
                        lkey: p.mr_a.lkey,
                        addr: IOVA_A + k * 64,
                        length: 8,
                    })
                    .collect();
                list[at] = bad;
                let (a0, b0) = (region_a(&p), region_b(&p));
                if op == SendOp::Send {
                    p.b.post_recv_sgl(
                        p.qb,
                        9,
                        &[Sge {
                            lkey: p.mr_b.lkey,
                            addr: IOVA_B,
                            length: 4096,
                        }],
                    )
                    .unwrap();
                }
                p.a.post_send_sgl(p.qa, wr(&p, 1, op, 0), &list).unwrap();
                let mut next = wr(&p, 2, SendOp::Write, 8192);
                next.local = Sge {
                    lkey: p.mr_a.lkey,
                    addr: IOVA_A,
                    length: 8,
                };
                p.a.post_send(p.qa, next).unwrap();
                p.settle();
                let status = if op == SendOp::Read {
                    WcStatus::LocalProtectionError
                } else {
                    WcStatus::LocalQpOperationError
                };
                let wa: Vec<_> = p.wcs_a().iter().map(|w| (w.wr_id, w.status)).collect();
                assert_eq!(wa, [(1, status), (2, WcStatus::Flushed)], "{what}");
                assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error), "{what}");
                assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts), "{what}");
                // The WRITE behind a READ leaves before the READ's answer
                // fails the QP (it is then flushed, having run: IBA
                // allows it); behind a SEND or WRITE it never leaves.
                let mut want_b = b0.clone();
                if op == SendOp::Read {
                    want_b[8192..8200].copy_from_slice(&a0[..8]);
                }
                assert!(region_b(&p) == want_b, "{what}: what landed at B");
                assert!(p.wcs_b().is_empty(), "{what}: B's receive unused");
                let now = region_a(&p);
                if op == SendOp::Read {
                    // The entries before the bad one may hold the answer's
                    // bytes; every other byte of A's region is as it was.
                    let mut want = a0.clone();
                    for s in &list[..at] {
                        let o = (s.addr - IOVA_A) as usize;
                        want[o..o + 8].copy_from_slice(&now[o..o + 8]);
                    }
                    assert!(now == want, "{what}");
                } else {
                    assert!(now == a0, "{what}");
                }
                let mut o = [0u8; 64];
                p.a.mr_read(other.lkey, 0x900_0000, &mut o).unwrap();
                assert_eq!(o, [0x33u8; 64], "{what}: the other PD's region");
            }
        }
    }
}

/// A second region of A's and of B's: what a list's later entries use,
/// deregistered after the post.
fn second_region(ep: &mut Endpoint, iova: u64) -> MrKeys {
    ep.reg_mr(Box::new(vec![0x77u8; 8192]), iova, Access::ALL)
        .unwrap()
}

/// Send side: a SEND or WRITE fails with a local QP operation error
/// (rxe_req.c `finish_packet`), a READ with a local protection error
/// (rxe_comp.c `do_read`); receive side: a local QP operation error
/// (rxe_resp.c `send_data_in`: `RESPST_ERR_MALFORMED_WQE`).
#[test]
fn an_entry_whose_region_went_away_fails_its_request() {
    // Send side: the gather of the packet that reaches the entry fails.
    for op in [SendOp::Send, SendOp::Write, SendOp::Read] {
        let mut p = pair(Mtu::Mtu1024, CAPS);
        let (a0, b0) = (region_a(&p), region_b(&p));
        let k2 = second_region(&mut p.a, 0x900_0000);
        if op == SendOp::Send {
            p.b.post_recv_sgl(
                p.qb,
                1,
                &[Sge {
                    lkey: p.mr_b.lkey,
                    addr: IOVA_B,
                    length: 8192,
                }],
            )
            .unwrap();
        }
        let list = [
            Sge {
                lkey: p.mr_a.lkey,
                addr: IOVA_A,
                length: 3000,
            },
            Sge {
                lkey: k2.lkey,
                addr: 0x900_0000,
                length: 3000,
            },
        ];
        p.a.post_send_sgl(p.qa, wr(&p, 5, op, 0), &list).unwrap();
        p.a.dereg_mr(k2.lkey).unwrap();
        p.settle();
        let wa = p.wcs_a();
        let status = if op == SendOp::Read {
            WcStatus::LocalProtectionError
        } else {
            WcStatus::LocalQpOperationError
        };
        assert_eq!((wa[0].wr_id, wa[0].status), (5, status), "{op:?}");
        assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
        if op == SendOp::Read {
            // The bytes for the first entry landed there, nothing else.
            let now = region_a(&p);
            assert!(now[3000..] == a0[3000..], "{op:?}");
            assert!(now[..3000] == b0[0x10_0000 - 0x10_0000..3000], "{op:?}");
        } else {
            assert!(region_a(&p) == a0, "{op:?}");
        }
    }
    // Receive side: the scatter into the entry fails.
    let mut p = pair(Mtu::Mtu1024, CAPS);
    let b0 = region_b(&p);
    let k2 = second_region(&mut p.b, 0x900_0000);
    let recv = [
        Sge {
            lkey: p.mr_b.lkey,
            addr: IOVA_B,
            length: 2000,
        },
        Sge {
            lkey: k2.lkey,
            addr: 0x900_0000,
            length: 2000,
        },
    ];
    p.b.post_recv_sgl(p.qb, 9, &recv).unwrap();
    p.b.dereg_mr(k2.lkey).unwrap();
    let local = [Sge {
        lkey: p.mr_a.lkey,
        addr: IOVA_A,
        length: 4000,
    }];
    p.a.post_send_sgl(p.qa, wr(&p, 6, SendOp::Send, 0), &local)
        .unwrap();
    p.settle();
    let wb = p.wcs_b();
    assert_eq!(
        (wb[0].wr_id, wb[0].status),
        (9, WcStatus::LocalQpOperationError)
    );
    let wa = p.wcs_a();
    assert_eq!(wa[0].status, WcStatus::RemoteOperationalError);
    assert!(region_b(&p)[2000..] == b0[2000..]);
}

#[test]
fn inline_data_is_copied_at_post_time() {
    for mtu in [Mtu::Mtu256, Mtu::Mtu1024] {
        let mut p = pair(mtu, CAPS);
        let mut want_b = region_b(&p);
        let mut buf = pattern(9, MAX_INLINE_DATA as usize);
        p.b.post_recv_sgl(
            p.qb,
            1,
            &[Sge {
                lkey: p.mr_b.lkey,
                addr: IOVA_B,
                length: 4096,
            }],
        )
        .unwrap();
        p.a.post_send_inline(p.qa, wr(&p, 1, SendOp::SendWithImm, 0), &buf)
            .unwrap();
        want_b[..buf.len()].copy_from_slice(&buf);
        // The program reuses its buffer at once.
        buf.fill(0xEE);
        let data = pattern(10, 300);
        p.a.post_send_inline(p.qa, wr(&p, 2, SendOp::Write, 0x4_0000), &data)
            .unwrap();
        want_b[0x4_0000..0x4_0000 + 300].copy_from_slice(&data);
        p.a.post_send_inline(p.qa, wr(&p, 3, SendOp::Write, 0x5_0000), &[])
            .unwrap();
        p.settle();
        let wa: Vec<_> = p
            .wcs_a()
            .iter()
            .map(|w| (w.wr_id, w.status, w.byte_len))
            .collect();
        let ok = WcStatus::Success;
        assert_eq!(wa, [(1, ok, MAX_INLINE_DATA), (2, ok, 300), (3, ok, 0)]);
        let wb = p.wcs_b();
        assert_eq!(wb[0].byte_len, MAX_INLINE_DATA);
        assert_eq!(wb[0].imm, Some(0xC0DE_0001));
        assert!(region_b(&p) == want_b, "{mtu:?}");
    }
    let mut p = pair(Mtu::Mtu1024, CAPS);
    let too_long = vec![0u8; MAX_INLINE_DATA as usize + 1];
    assert!(matches!(
        p.a.post_send_inline(p.qa, wr(&p, 1, SendOp::Send, 0), &too_long),
        Err(VerbsError::InvalidArgument(_))
    ));
    for op in [SendOp::Read, SendOp::FetchAdd] {
        assert!(matches!(
            p.a.post_send_inline(p.qa, wr(&p, 1, op, 0), &[0u8; 8]),
            Err(VerbsError::InvalidArgument(_))
        ));
    }
}

#[test]
fn lists_of_a_full_send_queue_reuse_their_slots() {
    // More requests than the queue holds, in waves: each takes the slot
    // of one that completed.
    let mut p = pair(Mtu::Mtu256, CAPS);
    let mut r = Rand(77);
    let mut want_b = region_b(&p);
    let want_a = region_a(&p);
    for wave in 0..5u64 {
        for k in 0..64u64 {
            let id = wave * 64 + k;
            let total = 1 + r.below(900) as u32;
            let n = 1 + r.below(u64::from(MAX_SGE)) as usize;
            let mut c = r.below(0x4_0000);
            let lens = split(&mut r, total, n);
            let list = place(&mut r, p.mr_a.lkey, IOVA_A, &mut c, &lens);
            let off = (k * 1024) as usize;
            let data = gather(&want_a, IOVA_A, &list);
            want_b[off..off + data.len()].copy_from_slice(&data);
            p.a.post_send_sgl(p.qa, wr(&p, id, SendOp::Write, off as u64), &list)
                .unwrap();
        }
        p.settle();
        let wa = p.wcs_a();
        assert_eq!(wa.len(), 64);
        assert!(wa.iter().all(|w| w.status == WcStatus::Success));
        assert!(region_b(&p) == want_b, "wave {wave}");
    }
}
