//! The `ibv_rc_pingpong` exchange parser (`engine::oob::pingpong`) on any
//! bytes. Invariants: no panic; a message that parses prints back (in
//! lower case) to one that parses to the same destination; `done` is
//! recognised only as itself.

use engine::oob::pingpong::{is_done, Dest};

pub fn run(data: &[u8]) {
    let _ = is_done(data);
    let Ok(d) = Dest::parse(data) else {
        return;
    };
    let bytes = d.to_bytes();
    assert_eq!(Dest::parse(&bytes).as_ref(), Ok(&d));
    assert!(
        data.eq_ignore_ascii_case(&bytes),
        "parsed {d} from other bytes"
    );
    assert!(!is_done(data));
    let _ = d.to_string();
}
