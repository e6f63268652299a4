//! The latency tools' modes on the command line: `--threaded` on a tool
//! without a threaded path of its own, and run-to-completion (the latency
//! tools' default) on more than one queue, end with exit 2 and say what to
//! use, before anything is attached or connected; so do `floor-lat`'s
//! options it cannot serve (queues not from 0, no timeout, a frame larger
//! than a UMEM frame).

use crate::roce_xdp;

fn usage_error(args: &[&str]) -> String {
    let out = roce_xdp(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    err
}

#[test]
fn threaded_on_a_bandwidth_tool_exits_2() {
    for tool in ["write-bw", "read-bw", "send-bw", "atomic-bw"] {
        let err = usage_error(&[tool, "192.0.2.1", "--threaded"]);
        assert!(err.contains("--threaded"), "{err}");
        assert!(err.contains("drop --threaded"), "{err}");
    }
}

#[test]
fn run_to_completion_on_several_queues_exits_2() {
    for tool in ["send-lat", "write-lat", "read-lat", "atomic-lat"] {
        let err = usage_error(&[tool, "192.0.2.1", "--queues", "0-1"]);
        assert!(err.contains("run-to-completion"), "{err}");
        assert!(err.contains("--queues 0"), "{err}");
        assert!(err.contains("--threaded"), "{err}");
    }
}

#[test]
fn floor_lat_refuses_what_it_cannot_do_with_exit_2() {
    let err = usage_error(&["floor-lat", "--iface", "lo", "--queues", "1-2"]);
    assert!(err.contains("start at 0"), "{err}");
    let err = usage_error(&["floor-lat", "--iface", "lo", "--timeout", "0"]);
    assert!(err.contains("--timeout"), "{err}");
    let err = usage_error(&[
        "floor-lat",
        "192.0.2.1",
        "--iface",
        "lo",
        "-s",
        "18446744073709551615",
    ]);
    assert!(err.contains("UMEM frame"), "{err}");
}
