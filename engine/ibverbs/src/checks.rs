//! The argument checks a verbs provider makes before it acts, with the
//! errnos Linux returns for Soft-RoCE (rxe): the RDMA core's
//! `ib_check_mr_access`, `rxe_cq_chk_attr`, `rxe_qp_chk_init`/`_cap` and
//! `rxe_qp_chk_attr`, and the QP state table `ib_modify_qp_is_ok`
//! (IBA 11.2.4.2, which attributes each transition requires and allows).
//! Pure functions of numbers: the exported verbs call them first.

use std::ffi::{c_int, c_uint};

use crate::abi::*;
use crate::limits;

/// The `IBV_ACCESS_*` bits the RDMA core knows: `IB_ACCESS_SUPPORTED`
/// (bits 0..9) and the optional bits (20..29) it ignores where a device
/// lacks them (`IB_ACCESS_OPTIONAL`).
pub const KNOWN_ACCESS: c_uint = ((1 << 10) - 1) | (((1 << 10) - 1) << 20);

/// `ibv_reg_mr`'s access flags (the RDMA core's `ib_check_mr_access`): no
/// unknown bit; remote write or atomic rights need local write; no
/// on-demand paging.
pub fn mr_access(flags: c_uint) -> Result<(), c_int> {
    if flags & !KNOWN_ACCESS != 0 {
        return Err(libc::EINVAL);
    }
    if flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) != 0
        && flags & IBV_ACCESS_LOCAL_WRITE == 0
    {
        return Err(libc::EINVAL);
    }
    if flags & IBV_ACCESS_ON_DEMAND != 0 {
        return Err(libc::EOPNOTSUPP);
    }
    Ok(())
}

/// `ibv_create_cq`: `rxe_cq_chk_attr` (1 <= cqe <= max_cqe) and uverbs'
/// `comp_vector < num_comp_vectors`.
pub fn cq_attr(cqe: c_int, comp_vector: c_int) -> Result<(), c_int> {
    if !(1..=limits::MAX_CQE).contains(&cqe) {
        return Err(libc::EINVAL);
    }
    if !(0..limits::NUM_COMP_VECTORS).contains(&comp_vector) {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// Requested QP capacities (`rxe_qp_chk_cap`): each within the device's
/// limits, else `EINVAL`.
pub fn qp_cap(
    max_send_wr: u32,
    max_recv_wr: u32,
    max_sge: (u32, u32),
    inline: u32,
) -> Result<(), c_int> {
    let wr = limits::MAX_QP_WR as u32;
    let sge = limits::MAX_SGE as u32;
    if max_send_wr > wr || max_recv_wr > wr || max_sge.0 > sge || max_sge.1 > sge {
        return Err(libc::EINVAL);
    }
    if inline > limits::MAX_INLINE_DATA {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// (required, optional) attributes of an RC QP's transition `from` ->
/// `to`, or None where the transition does not exist: the RC column of
/// the RDMA core's `qp_state_table` (IBA 11.2.4.2, table 91).
fn rc_transition(from: c_int, to: c_int) -> Option<(c_int, c_int)> {
    if !(IBV_QPS_RESET..=IBV_QPS_ERR).contains(&from) {
        return None;
    }
    Some(match (from, to) {
        (_, IBV_QPS_RESET) | (_, IBV_QPS_ERR) => (0, 0),
        (IBV_QPS_RESET, IBV_QPS_INIT) => (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0),
        (IBV_QPS_INIT, IBV_QPS_INIT) => (0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
        (IBV_QPS_INIT, IBV_QPS_RTR) => (
            IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER,
            IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
        ),
        (IBV_QPS_RTR, IBV_QPS_RTS) => (
            IBV_QP_SQ_PSN
                | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_MAX_QP_RD_ATOMIC,
            IBV_QP_CUR_STATE
                | IBV_QP_ALT_PATH
                | IBV_QP_ACCESS_FLAGS
                | IBV_QP_MIN_RNR_TIMER
                | IBV_QP_PATH_MIG_STATE,
        ),
        (IBV_QPS_RTS, IBV_QPS_RTS) => (
            0,
            IBV_QP_CUR_STATE
                | IBV_QP_ACCESS_FLAGS
                | IBV_QP_ALT_PATH
                | IBV_QP_PATH_MIG_STATE
                | IBV_QP_MIN_RNR_TIMER,
        ),
        (IBV_QPS_RTS, IBV_QPS_SQD) => (0, IBV_QP_EN_SQD_ASYNC_NOTIFY),
        (IBV_QPS_SQD, IBV_QPS_RTS) => (
            0,
            IBV_QP_CUR_STATE
                | IBV_QP_ACCESS_FLAGS
                | IBV_QP_MIN_RNR_TIMER
                | IBV_QP_ALT_PATH
                | IBV_QP_PATH_MIG_STATE,
        ),
        (IBV_QPS_SQD, IBV_QPS_SQD) => (
            0,
            IBV_QP_AV
                | IBV_QP_ALT_PATH
                | IBV_QP_ACCESS_FLAGS
                | IBV_QP_PKEY_INDEX
                | IBV_QP_MIN_RNR_TIMER
                | IBV_QP_PATH_MIG_STATE
                | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_MAX_QP_RD_ATOMIC
                | IBV_QP_MAX_DEST_RD_ATOMIC,
        ),
        (IBV_QPS_SQE, IBV_QPS_RTS) => (0, IBV_QP_CUR_STATE),
        _ => return None,
    })
}

/// `ib_modify_qp_is_ok` for an RC QP in `cur` given `qp_mask` (with
/// `new_state` when the mask has `IBV_QP_STATE`): the transition exists,
/// every attribute it requires is given, and none it does not allow.
pub fn rc_modify_is_ok(cur: c_int, new_state: Option<c_int>, qp_mask: c_int) -> bool {
    let to = new_state.unwrap_or(cur);
    let Some((req, opt)) = rc_transition(cur, to) else {
        return false;
    };
    let given = qp_mask & !IBV_QP_STATE;
    given & req == req && given & !(req | opt) == 0
}

/// The attributes only RC has: the UC column of `qp_state_table` is RC's
/// without them (IBA 11.2.4.2, table 91).
const RC_ONLY: c_int = IBV_QP_TIMEOUT
    | IBV_QP_RETRY_CNT
    | IBV_QP_RNR_RETRY
    | IBV_QP_MAX_QP_RD_ATOMIC
    | IBV_QP_MAX_DEST_RD_ATOMIC
    | IBV_QP_MIN_RNR_TIMER;

/// `ib_modify_qp_is_ok` for a UC QP: [`rc_modify_is_ok`] on the UC
/// column (INIT->RTR needs AV, PATH_MTU, DEST_QPN, RQ_PSN; RTR->RTS
/// SQ_PSN; the timeout, retry counts, RNR timer and READ/atomic depths
/// are not allowed anywhere).
pub fn uc_modify_is_ok(cur: c_int, new_state: Option<c_int>, qp_mask: c_int) -> bool {
    let to = new_state.unwrap_or(cur);
    let Some((req, opt)) = rc_transition(cur, to) else {
        return false;
    };
    let (req, opt) = (req & !RC_ONLY, opt & !RC_ONLY);
    let given = qp_mask & !IBV_QP_STATE;
    given & req == req && given & !(req | opt) == 0
}

/// The attribute values `rxe_qp_chk_attr` checks: port 1, P_Key index 0
/// (one P_Key), a path MTU the port carries, RDMA read depths within the
/// device's, a local ACK timeout exponent of at most 31.
pub struct ModifyValues {
    pub port_num: u8,
    pub pkey_index: u16,
    pub path_mtu: c_int,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub timeout: u8,
    pub access: c_uint,
}

pub fn modify_values(qp_mask: c_int, v: &ModifyValues) -> Result<(), &'static str> {
    let has = |bit| qp_mask & bit != 0;
    if has(IBV_QP_PORT) && v.port_num != 1 {
        return Err("port_num is not 1 (the device has one port)");
    }
    if has(IBV_QP_PKEY_INDEX) && v.pkey_index != 0 {
        return Err("pkey_index is not 0 (the P_Key table holds one entry)");
    }
    if has(IBV_QP_PATH_MTU) && !(1..=5).contains(&v.path_mtu) {
        return Err("path_mtu is not one of IBV_MTU_256..IBV_MTU_4096");
    }
    if has(IBV_QP_MAX_QP_RD_ATOMIC) && c_int::from(v.max_rd_atomic) > limits::MAX_QP_RD_ATOM {
        return Err("max_rd_atomic is above the device's max_qp_init_rd_atom");
    }
    if has(IBV_QP_MAX_DEST_RD_ATOMIC) && c_int::from(v.max_dest_rd_atomic) > limits::MAX_QP_RD_ATOM
    {
        return Err("max_dest_rd_atomic is above the device's max_qp_rd_atom");
    }
    if has(IBV_QP_TIMEOUT) && v.timeout > 31 {
        return Err("timeout is above 31");
    }
    if has(IBV_QP_ACCESS_FLAGS) && v.access & !KNOWN_ACCESS != 0 {
        return Err("qp_access_flags has unknown bits");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mr_access_as_the_rdma_core_checks_it() {
        assert_eq!(mr_access(IBV_ACCESS_LOCAL_WRITE), Ok(()));
        assert_eq!(mr_access(0), Ok(()));
        assert_eq!(mr_access(IBV_ACCESS_REMOTE_READ), Ok(()));
        assert_eq!(mr_access(IBV_ACCESS_REMOTE_WRITE), Err(libc::EINVAL));
        assert_eq!(mr_access(IBV_ACCESS_REMOTE_ATOMIC), Err(libc::EINVAL));
        assert_eq!(
            mr_access(IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE),
            Ok(())
        );
        assert_eq!(mr_access(1 << 15), Err(libc::EINVAL));
        // IBV_ACCESS_RELAXED_ORDERING is optional: accepted.
        assert_eq!(mr_access(1 << 20), Ok(()));
        assert_eq!(mr_access(IBV_ACCESS_ON_DEMAND), Err(libc::EOPNOTSUPP));
    }

    #[test]
    fn cq_sizes_and_vectors() {
        assert_eq!(cq_attr(1, 0), Ok(()));
        assert_eq!(cq_attr(limits::MAX_CQE, 0), Ok(()));
        assert_eq!(cq_attr(limits::MAX_CQE + 1, 0), Err(libc::EINVAL));
        assert_eq!(cq_attr(0, 0), Err(libc::EINVAL));
        assert_eq!(cq_attr(-1, 0), Err(libc::EINVAL));
        assert_eq!(cq_attr(16, limits::NUM_COMP_VECTORS), Err(libc::EINVAL));
        assert_eq!(cq_attr(16, -1), Err(libc::EINVAL));
    }

    #[test]
    fn qp_capacities() {
        assert_eq!(qp_cap(16, 16, (1, 1), 0), Ok(()));
        let wr = limits::MAX_QP_WR as u32;
        assert_eq!(qp_cap(wr + 1, 1, (1, 1), 0), Err(libc::EINVAL));
        assert_eq!(qp_cap(1, wr + 1, (1, 1), 0), Err(libc::EINVAL));
        let sge = limits::MAX_SGE as u32;
        assert_eq!(qp_cap(1, 1, (sge + 1, 1), 0), Err(libc::EINVAL));
        assert_eq!(qp_cap(1, 1, (1, sge + 1), 0), Err(libc::EINVAL));
        assert_eq!(
            qp_cap(1, 1, (1, 1), limits::MAX_INLINE_DATA + 1),
            Err(libc::EINVAL)
        );
    }

    #[test]
    fn the_rc_state_table() {
        let init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        let rtr = IBV_QP_AV
            | IBV_QP_PATH_MTU
            | IBV_QP_DEST_QPN
            | IBV_QP_RQ_PSN
            | IBV_QP_MAX_DEST_RD_ATOMIC
            | IBV_QP_MIN_RNR_TIMER;
        let rts = IBV_QP_SQ_PSN
            | IBV_QP_TIMEOUT
            | IBV_QP_RETRY_CNT
            | IBV_QP_RNR_RETRY
            | IBV_QP_MAX_QP_RD_ATOMIC;
        assert!(rc_modify_is_ok(
            IBV_QPS_RESET,
            Some(IBV_QPS_INIT),
            IBV_QP_STATE | init
        ));
        assert!(!rc_modify_is_ok(
            IBV_QPS_RESET,
            Some(IBV_QPS_INIT),
            IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX
        ));
        assert!(!rc_modify_is_ok(
            IBV_QPS_RESET,
            Some(IBV_QPS_INIT),
            IBV_QP_STATE | init | IBV_QP_QKEY
        ));
        assert!(rc_modify_is_ok(
            IBV_QPS_INIT,
            Some(IBV_QPS_RTR),
            IBV_QP_STATE | rtr
        ));
        assert!(rc_modify_is_ok(
            IBV_QPS_INIT,
            Some(IBV_QPS_RTR),
            IBV_QP_STATE | rtr | IBV_QP_ACCESS_FLAGS
        ));
        assert!(!rc_modify_is_ok(
            IBV_QPS_INIT,
            Some(IBV_QPS_RTR),
            IBV_QP_STATE | (rtr & !IBV_QP_AV)
        ));
        assert!(rc_modify_is_ok(
            IBV_QPS_RTR,
            Some(IBV_QPS_RTS),
            IBV_QP_STATE | rts
        ));
        assert!(!rc_modify_is_ok(
            IBV_QPS_RTR,
            Some(IBV_QPS_RTS),
            IBV_QP_STATE | rts | IBV_QP_RATE_LIMIT
        ));
        assert!(!rc_modify_is_ok(
            IBV_QPS_RTR,
            Some(IBV_QPS_RTS),
            IBV_QP_STATE | (rts & !IBV_QP_SQ_PSN)
        ));
        assert!(!rc_modify_is_ok(
            IBV_QPS_RESET,
            Some(IBV_QPS_RTR),
            IBV_QP_STATE | rtr
        ));
        assert!(!rc_modify_is_ok(
            IBV_QPS_RESET,
            Some(IBV_QPS_RTS),
            IBV_QP_STATE | rts
        ));
        for s in [
            IBV_QPS_RESET,
            IBV_QPS_INIT,
            IBV_QPS_RTR,
            IBV_QPS_RTS,
            IBV_QPS_SQD,
            IBV_QPS_SQE,
            IBV_QPS_ERR,
        ] {
            assert!(rc_modify_is_ok(s, Some(IBV_QPS_RESET), IBV_QP_STATE));
            assert!(rc_modify_is_ok(s, Some(IBV_QPS_ERR), IBV_QP_STATE));
        }
        // No state change: the attributes the current state allows.
        assert!(rc_modify_is_ok(IBV_QPS_RTS, None, IBV_QP_MIN_RNR_TIMER));
        assert!(!rc_modify_is_ok(IBV_QPS_RTS, None, IBV_QP_PATH_MTU));
        assert!(rc_modify_is_ok(IBV_QPS_INIT, None, IBV_QP_ACCESS_FLAGS));
        assert!(!rc_modify_is_ok(IBV_QPS_RESET, None, IBV_QP_ACCESS_FLAGS));
        assert!(!rc_modify_is_ok(IBV_QPS_RESET, Some(7), IBV_QP_STATE));
    }

    #[test]
    fn uc_modify_follows_the_uc_column() {
        let init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        assert!(uc_modify_is_ok(IBV_QPS_RESET, Some(IBV_QPS_INIT), init));
        let rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        assert!(uc_modify_is_ok(IBV_QPS_INIT, Some(IBV_QPS_RTR), rtr));
        assert!(!uc_modify_is_ok(
            IBV_QPS_INIT,
            Some(IBV_QPS_RTR),
            rtr & !IBV_QP_PATH_MTU
        ));
        for rc_only in [IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER] {
            assert!(!uc_modify_is_ok(
                IBV_QPS_INIT,
                Some(IBV_QPS_RTR),
                rtr | rc_only
            ));
        }
        // What RC needs at INIT->RTR, UC refuses.
        assert!(!rc_modify_is_ok(IBV_QPS_INIT, Some(IBV_QPS_RTR), rtr));
        let rts = IBV_QP_STATE | IBV_QP_SQ_PSN;
        assert!(uc_modify_is_ok(IBV_QPS_RTR, Some(IBV_QPS_RTS), rts));
        assert!(!uc_modify_is_ok(
            IBV_QPS_RTR,
            Some(IBV_QPS_RTS),
            IBV_QP_STATE
        ));
        for rc_only in [
            IBV_QP_TIMEOUT,
            IBV_QP_RETRY_CNT,
            IBV_QP_RNR_RETRY,
            IBV_QP_MAX_QP_RD_ATOMIC,
        ] {
            assert!(!uc_modify_is_ok(
                IBV_QPS_RTR,
                Some(IBV_QPS_RTS),
                rts | rc_only
            ));
        }
        assert!(uc_modify_is_ok(IBV_QPS_RTS, None, IBV_QP_ACCESS_FLAGS));
        assert!(!uc_modify_is_ok(IBV_QPS_RTS, None, IBV_QP_MIN_RNR_TIMER));
        assert!(uc_modify_is_ok(
            IBV_QPS_RTS,
            Some(IBV_QPS_ERR),
            IBV_QP_STATE
        ));
    }

    #[test]
    fn attribute_values() {
        let ok = ModifyValues {
            port_num: 1,
            pkey_index: 0,
            path_mtu: 3,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            timeout: 14,
            access: IBV_ACCESS_REMOTE_WRITE,
        };
        let all = IBV_QP_PORT
            | IBV_QP_PKEY_INDEX
            | IBV_QP_PATH_MTU
            | IBV_QP_MAX_QP_RD_ATOMIC
            | IBV_QP_MAX_DEST_RD_ATOMIC
            | IBV_QP_TIMEOUT
            | IBV_QP_ACCESS_FLAGS;
        assert_eq!(modify_values(all, &ok), Ok(()));
        // Soft-RoCE's limit, which perftest passes on from an rxe peer.
        let rxe_reads = ModifyValues {
            max_rd_atomic: 128,
            max_dest_rd_atomic: 128,
            ..ok
        };
        assert_eq!(modify_values(all, &rxe_reads), Ok(()));
        let bad = [
            ModifyValues { port_num: 2, ..ok },
            ModifyValues {
                pkey_index: 1,
                ..ok
            },
            ModifyValues { path_mtu: 6, ..ok },
            ModifyValues { path_mtu: 0, ..ok },
            ModifyValues {
                max_rd_atomic: 200,
                ..ok
            },
            ModifyValues {
                max_dest_rd_atomic: 200,
                ..ok
            },
            ModifyValues { timeout: 32, ..ok },
            ModifyValues {
                access: 1 << 15,
                ..ok
            },
        ];
        for v in &bad {
            assert!(modify_values(all, v).is_err());
            // Values the mask does not name are not looked at.
            assert_eq!(modify_values(0, v), Ok(()));
        }
    }
}
