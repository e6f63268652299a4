//! With the datapath's copy + CRC (`io::copy_crc::best`, what the engine's
//! devices give their endpoints: the one-pass path where the CPU has
//! AVX-512 VPCLMULQDQ, the portable one otherwise), the templated packets the
//! engine sends are byte for byte those of `emit_frame`, whose ICRC the
//! Scapy, tshark and rxe checks vouch for: the comparison of
//! `engine/proto/tests/wire/template.rs`, for every templated opcode, IPv4 and IPv6, with and
//! without a VLAN tag, over its sizes and around the one-pass path's 256-
//! and 64-byte blocks. On a CPU without the one-pass path it says so, and
//! fails if `ROCE_XDP_REQUIRE_ONE_PASS_CRC` is set. The function is passed
//! to the emitter explicitly, so this test needs no process of its own.

#[path = "../proto/tests/wire/template_support.rs"]
mod wire_support;

use engine::io::copy_crc;
use wire_support::{check_templated_equals_emit_frame, SIZES};

#[test]
fn templated_packets_with_the_one_pass_copy_crc_equal_emit_frame() {
    let accelerated = copy_crc::one_pass().is_some();
    if !accelerated {
        assert!(
            std::env::var_os("ROCE_XDP_REQUIRE_ONE_PASS_CRC").is_none(),
            "ROCE_XDP_REQUIRE_ONE_PASS_CRC is set but this CPU lacks AVX-512 VPCLMULQDQ: \
             run on one that has it or unset it"
        );
        eprintln!(
            "this CPU lacks AVX-512 VPCLMULQDQ: the templated packets were checked with the \
             portable copy + CRC, not the one-pass one"
        );
    }
    let mut sizes: Vec<usize> = SIZES.to_vec();
    sizes.extend(250..=330);
    sizes.extend(500..=520);
    sizes.extend([1087, 2048, 3071, 4032, 4033, 4095]);
    sizes.extend(4089..=4092);
    check_templated_equals_emit_frame(copy_crc::best(), &sizes);
}
