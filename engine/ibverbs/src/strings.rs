//! libibverbs' pure helpers: the enum-to-string functions and the rate
//! conversions. They touch no device and return what rdma-core's
//! `enum_strs.c` and `verbs.c` return for every value, "unknown" (or -1,
//! or `IBV_RATE_MAX`) outside the enum.

use std::ffi::{c_char, c_int};

/// A NUL-terminated table entry, or "unknown" outside the table.
fn entry(table: &[&'static str], i: c_int) -> *const c_char {
    usize::try_from(i)
        .ok()
        .and_then(|i| table.get(i))
        .copied()
        .unwrap_or("unknown\0")
        .as_ptr() as *const c_char
}

/// `enum ibv_node_type`, from `IBV_NODE_CA` (1) to `IBV_NODE_UNSPECIFIED`.
const NODE_TYPES: [&str; 8] = [
    "unknown\0",
    "InfiniBand channel adapter\0",
    "InfiniBand switch\0",
    "InfiniBand router\0",
    "iWARP NIC\0",
    "usNIC\0",
    "usNIC UDP\0",
    "unspecified\0",
];

#[no_mangle]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    entry(&NODE_TYPES, node_type)
}

/// `enum ibv_port_state`, `IBV_PORT_NOP` (0) to `IBV_PORT_ACTIVE_DEFER`.
const PORT_STATES: [&str; 6] = [
    "no state change (NOP)\0",
    "down\0",
    "init\0",
    "armed\0",
    "active\0",
    "active defer\0",
];

#[no_mangle]
pub extern "C" fn ibv_port_state_str(port_state: c_int) -> *const c_char {
    entry(&PORT_STATES, port_state)
}

/// `enum ibv_event_type`, `IBV_EVENT_CQ_ERR` (0) to `IBV_EVENT_WQ_FATAL`.
const EVENT_TYPES: [&str; 20] = [
    "CQ error\0",
    "local work queue catastrophic error\0",
    "invalid request local work queue error\0",
    "local access violation work queue error\0",
    "communication established\0",
    "send queue drained\0",
    "path migrated\0",
    "path migration request error\0",
    "local catastrophic error\0",
    "port active\0",
    "port error\0",
    "LID change\0",
    "P_Key change\0",
    "SM change\0",
    "SRQ catastrophic error\0",
    "SRQ limit reached\0",
    "last WQE reached\0",
    "client reregistration\0",
    "GID table change\0",
    "WQ fatal\0",
];

#[no_mangle]
pub extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    entry(&EVENT_TYPES, event)
}

/// `enum ibv_wc_status`, `IBV_WC_SUCCESS` (0) to `IBV_WC_TM_RNDV_INCOMPLETE`.
const WC_STATUSES: [&str; 24] = [
    "success\0",
    "local length error\0",
    "local QP operation error\0",
    "local EE context operation error\0",
    "local protection error\0",
    "Work Request Flushed Error\0",
    "memory management operation error\0",
    "bad response error\0",
    "local access error\0",
    "remote invalid request error\0",
    "remote access error\0",
    "remote operation error\0",
    "transport retry counter exceeded\0",
    "RNR retry counter exceeded\0",
    "local RDD violation error\0",
    "remote invalid RD request\0",
    "aborted error\0",
    "invalid EE context number\0",
    "invalid EE context state\0",
    "fatal error\0",
    "response timeout error\0",
    "general error\0",
    "TM error\0",
    "TM software rendezvous\0",
];

#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    entry(&WC_STATUSES, status)
}

/// `IBV_RATE_MAX`: what the reverse conversions return for a value that
/// names no rate.
const IBV_RATE_MAX: c_int = 0;

/// `enum ibv_rate` -> (multiple of 2.5 Gb/s, or -1 where the rate is none;
/// Mb/s), in the enum's order (`verbs.h`: 2 = 2.5 Gb/s, 3 = 10, ... 24 = 1200).
const RATES: [(c_int, c_int, c_int); 23] = [
    // (enum value, ibv_rate_to_mult, ibv_rate_to_mbps)
    (2, 1, 2500),
    (3, 4, 10000),
    (4, 12, 30000),
    (5, 2, 5000),
    (6, 8, 20000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, -1, 14062),
    (12, -1, 56250),
    (13, -1, 112500),
    (14, -1, 168750),
    (15, -1, 25781),
    (16, -1, 103125),
    (17, -1, 206250),
    (18, -1, 309375),
    (19, 11, 28125),
    (20, 20, 53125),
    (21, 160, 425000),
    (22, 240, 637500),
    (23, 320, 850000),
    (24, 480, 1275000),
];

#[no_mangle]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

#[no_mangle]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == mult && mult > 0)
        .map_or(IBV_RATE_MAX, |r| r.0)
}

#[no_mangle]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

#[no_mangle]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.2 == mbps)
        .map_or(IBV_RATE_MAX, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn s(p: *const c_char) -> &'static str {
        // SAFETY: every pointer these functions return is a static,
        // NUL-terminated table entry.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn strings_cover_each_enum_and_say_unknown_outside() {
        assert_eq!(s(ibv_node_type_str(1)), "InfiniBand channel adapter");
        assert_eq!(s(ibv_node_type_str(0)), "unknown");
        assert_eq!(s(ibv_node_type_str(8)), "unknown");
        assert_eq!(s(ibv_port_state_str(4)), "active");
        assert_eq!(s(ibv_port_state_str(-1)), "unknown");
        assert_eq!(s(ibv_event_type_str(15)), "SRQ limit reached");
        assert_eq!(s(ibv_event_type_str(20)), "unknown");
        assert_eq!(s(ibv_wc_status_str(10)), "remote access error");
        assert_eq!(s(ibv_wc_status_str(23)), "TM software rendezvous");
        assert_eq!(s(ibv_wc_status_str(24)), "unknown");
    }

    #[test]
    fn rates_convert_both_ways() {
        for &(rate, mult, mbps) in &RATES {
            assert_eq!(ibv_rate_to_mult(rate), mult);
            assert_eq!(ibv_rate_to_mbps(rate), mbps);
            assert_eq!(mbps_to_ibv_rate(mbps), rate);
            if mult > 0 {
                assert_eq!(mult_to_ibv_rate(mult), rate);
            }
        }
        assert_eq!(ibv_rate_to_mult(0), -1);
        assert_eq!(ibv_rate_to_mbps(99), -1);
        assert_eq!(mult_to_ibv_rate(3), IBV_RATE_MAX);
        assert_eq!(mult_to_ibv_rate(-1), IBV_RATE_MAX);
        assert_eq!(mbps_to_ibv_rate(1), IBV_RATE_MAX);
    }
}
