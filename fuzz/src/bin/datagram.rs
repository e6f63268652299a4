//! AFL entry point of the `datagram` target (`fuzz::datagram::run`).
fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::datagram::run(data));
}
