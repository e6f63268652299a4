//! The consumer QP's attributes and transitions, as the kernel's
//! `rdma_init_qp_attr` gives them and librdmacm applies them
//! (`ucma_init_conn_qp`, `ucma_init_ud_qp`, `ucma_modify_qp_rtr`,
//! `ucma_modify_qp_rts`, `ucma_modify_qp_err`).

use std::ffi::c_int;

use crate::abi::*;
use crate::device::{Device, SGID_INDEX};
use crate::ibv::*;
use crate::state::IdState;

/// The local ACK timeout of a connected QP: the RoCE path's packet
/// lifetime (16, the kernel's CMA_IBOE_PACKET_LIFETIME) + 1, as the
/// kernel's cm_init_av_by_path; RDMA_OPTION_ID_ACK_TIMEOUT overrides it.
const DEFAULT_ACK_TIMEOUT: u8 = 17;

/// The address handle attributes toward the id's peer: its GID through
/// GID 1 (RoCE v2), the id's TOS as traffic class.
pub fn ah_attr(s: &IdState) -> ibv_ah_attr {
    let mut a = ibv_ah_attr {
        is_global: 1,
        port_num: 1,
        ..Default::default()
    };
    a.grh.dgid = s.peer_gid;
    a.grh.sgid_index = SGID_INDEX;
    a.grh.hop_limit = 64;
    a.grh.traffic_class = s.tos;
    a
}

/// `rdma_init_qp_attr`: the attributes and mask to move the id's QP to
/// `attr.qp_state` (INIT, RTR or RTS).
pub fn init_attr(
    s: &IdState,
    dev: &Device,
    qp_type: c_int,
    attr: &mut ibv_qp_attr,
) -> Result<c_int, c_int> {
    let state = attr.qp_state;
    *attr = ibv_qp_attr::default();
    attr.qp_state = state;
    let mut mask = IBV_QP_STATE;
    match state {
        IBV_QPS_INIT => {
            attr.pkey_index = 0;
            attr.port_num = 1;
            mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
            if qp_type == IBV_QPT_UD {
                attr.qkey = s.qkey;
                mask |= IBV_QP_QKEY;
            } else {
                // Before a connection, 0 (cma_ib_init_qp_attr); after the
                // REQ/REP, remote write, and read/atomic when the peer may
                // issue them (cm_init_qp_init_attr).
                attr.qp_access_flags =
                    match s.conn.is_some() || s.phase == crate::state::Phase::Established {
                        false => 0,
                        true => {
                            IBV_ACCESS_REMOTE_WRITE
                                | if s.responder_resources > 0 {
                                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC
                                } else {
                                    0
                                }
                        }
                    };
                mask |= IBV_QP_ACCESS_FLAGS;
            }
        }
        IBV_QPS_RTR => {
            if qp_type == IBV_QPT_UD {
                return Ok(mask);
            }
            if s.conn.is_none() {
                return Err(libc::EINVAL);
            }
            attr.ah_attr = ah_attr(s);
            attr.path_mtu = s.path_mtu.min(dev.active_mtu);
            attr.dest_qp_num = s.remote_qpn;
            // The Starting PSN a side announces in its REQ/REP is the one
            // it receives from (IBA 12.7.23: the REQ's "Starting PSN" is the
            // PSN the active side's receive queue expects; the kernel's
            // cm.c: ib_send_cm_req / ib_send_cm_rep set rq_psn to their own
            // message's PSN).
            attr.rq_psn = s.psn;
            attr.max_dest_rd_atomic = s.responder_resources;
            attr.min_rnr_timer = 0;
            mask |= IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER;
        }
        IBV_QPS_RTS => {
            mask |= IBV_QP_SQ_PSN;
            if qp_type == IBV_QPT_UD {
                attr.sq_psn = s.psn;
                return Ok(mask);
            }
            if s.conn.is_none() {
                return Err(libc::EINVAL);
            }
            // The send queue starts at the PSN the peer announced (the
            // kernel's cm_req_handler / cm_rep_handler: sq_psn = the
            // received message's Starting PSN).
            attr.sq_psn = s.remote_psn;
            attr.timeout = s.ack_timeout.unwrap_or(DEFAULT_ACK_TIMEOUT);
            attr.retry_cnt = s.retry_count;
            attr.rnr_retry = s.rnr_retry_count;
            attr.max_rd_atomic = s.initiator_depth;
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
        _ => return Err(libc::EINVAL),
    }
    Ok(mask)
}

fn modify(qp: *mut ibv_qp, attr: &mut ibv_qp_attr, mask: c_int) -> Result<(), c_int> {
    // SAFETY: `qp` is the id's live QP; the attributes outlive the call.
    match unsafe { ibv_modify_qp(qp, attr, mask) } {
        0 => Ok(()),
        e => Err(e),
    }
}

fn qp_type(qp: *mut ibv_qp) -> c_int {
    // SAFETY: `qp` is the id's live QP.
    unsafe { (*qp).qp_type }
}

/// A new QP to INIT (RC/UC: `ucma_init_conn_qp`) or on to RTS (UD:
/// `ucma_init_ud_qp`).
pub fn init_new(s: &IdState, dev: &Device, qp: *mut ibv_qp) -> Result<(), c_int> {
    let t = qp_type(qp);
    for state in [IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS] {
        let mut a = ibv_qp_attr {
            qp_state: state,
            ..Default::default()
        };
        let mask = init_attr(s, dev, t, &mut a)?;
        modify(qp, &mut a, mask)?;
        if t != IBV_QPT_UD {
            break;
        }
    }
    Ok(())
}

/// `ucma_modify_qp_rtr`: INIT again (the access flags the connection
/// allows), then RTR; `resp_res` other than RDMA_MAX_RESP_RES overrides
/// the responder resources.
pub fn modify_rtr(s: &IdState, dev: &Device, qp: *mut ibv_qp, resp_res: u8) -> Result<(), c_int> {
    let t = qp_type(qp);
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_INIT,
        ..Default::default()
    };
    let mask = init_attr(s, dev, t, &mut a)?;
    modify(qp, &mut a, mask)?;
    a.qp_state = IBV_QPS_RTR;
    let mask = init_attr(s, dev, t, &mut a)?;
    if resp_res != RDMA_MAX_RESP_RES {
        a.max_dest_rd_atomic = resp_res;
    }
    modify(qp, &mut a, mask)
}

/// `ucma_modify_qp_rts`.
pub fn modify_rts(s: &IdState, qp: *mut ibv_qp, init_depth: u8) -> Result<(), c_int> {
    let t = qp_type(qp);
    let dev = crate::device::device()?;
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_RTS,
        ..Default::default()
    };
    let mask = init_attr(s, dev, t, &mut a)?;
    if init_depth != RDMA_MAX_INIT_DEPTH {
        a.max_rd_atomic = init_depth;
    }
    modify(qp, &mut a, mask)
}

/// `ucma_modify_qp_err` (errors ignored, as librdmacm's callers do).
pub fn modify_err(qp: *mut ibv_qp) {
    let mut a = ibv_qp_attr {
        qp_state: IBV_QPS_ERR,
        ..Default::default()
    };
    let _ = modify(qp, &mut a, IBV_QP_STATE);
}
