//! AFL entry point of the `frame` target (`fuzz::frame::run`).
fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::frame::run(data));
}
