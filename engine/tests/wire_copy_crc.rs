//! With the datapath's one-pass copy + CRC installed (`io::copy_crc`, as
//! every AF_XDP socket does), the templated packets the engine sends are
//! byte for byte those of `emit_frame`, whose ICRC the Scapy, tshark and
//! rxe checks vouch for: the comparison of `engine/proto/tests/wire/template.rs`, for every
//! templated opcode, IPv4 and IPv6, with and without a VLAN tag, over its
//! sizes and around the one-pass path's 256- and 64-byte blocks. (Its own
//! process: the accelerator is process-wide.)

#[path = "../proto/tests/wire/template_support.rs"]
mod wire_support;

use engine::io::copy_crc;
use wire_support::{check_templated_equals_emit_frame, SIZES};

#[test]
fn templated_packets_with_the_one_pass_copy_crc_equal_emit_frame() {
    let accelerated = copy_crc::install();
    eprintln!("one-pass copy + CRC in use: {accelerated}");
    let mut sizes: Vec<usize> = SIZES.to_vec();
    sizes.extend(250..=330);
    sizes.extend(500..=520);
    sizes.extend([1087, 2048, 3071, 4032, 4033, 4095]);
    sizes.extend(4089..=4092);
    check_templated_equals_emit_frame(&sizes);
}
