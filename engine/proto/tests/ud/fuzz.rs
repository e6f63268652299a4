//! Whatever arrives, a UD receiver never panics: arbitrary bytes, and
//! valid datagrams with bytes changed and the ICRC made right again (so
//! they reach the QP's checks), with receive buffers of every size.

use core::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;
use proto::time::Instant;
use proto::wire::{frame_icrc, icrc};

use crate::support::*;

const QKEY: u32 = 0x11;

fn setup() -> (Node, Node, u32, u32, Vec<Vec<u8>>) {
    let mut a = node(0xA, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    let mut b = node(0xB, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    let qa = ud_qp(&mut a, QKEY, 0);
    let qb = ud_qp(&mut b, QKEY, 0);
    let ah = ah_to(&mut a, &b);
    for (i, len) in [0u32, 1, 40, 1000].into_iter().enumerate() {
        a.ep.post_ud_send(qa, send_wr(&a, i as u64, 0, len, ah, qb, QKEY))
            .unwrap();
    }
    let fs = frames(&mut a);
    (a, b, qa, qb, fs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..1600)) {
        let (_a, mut b, _qa, qb, _) = setup();
        recv(&mut b, qb, 1, 0, 2000);
        b.ep.handle_packet(Instant::ZERO, &bytes);
        let _ = completions(&mut b);
    }

    #[test]
    fn mutated_datagrams_with_a_good_icrc_never_panic(
        which in 0usize..4,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        buf_len in 0u32..1200,
    ) {
        let (_a, mut b, _qa, qb, fs) = setup();
        recv(&mut b, qb, 1, 0, buf_len);
        recv(&mut b, qb, 2, 1, 2000);
        let mut f = fs[which].clone();
        for (at, v) in &edits {
            let i = at.index(f.len());
            f[i] = *v;
        }
        if truncate {
            f.truncate(cut.index(f.len() + 1));
        }
        if let Ok(crc) = frame_icrc(&f) {
            let mut t = [0u8; 4];
            icrc::write(crc, &mut t);
            let n = f.len();
            if n >= 4 {
                // The ICRC sits at the end of the IP packet; a frame whose
                // IP length says otherwise just fails its check.
                f[n - 4..].copy_from_slice(&t);
            }
        }
        b.ep.handle_packet(Instant::ZERO, &f);
        for wc in completions(&mut b) {
            // Whatever was placed stayed inside its receive.
            prop_assert!(wc.byte_len <= 2000);
        }
    }
}
