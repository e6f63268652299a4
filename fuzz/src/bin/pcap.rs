//! AFL entry point of the `pcap` target (`fuzz::pcap::run`).
fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::pcap::run(data));
}
