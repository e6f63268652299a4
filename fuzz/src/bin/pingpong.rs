//! AFL entry point of the `pingpong` target (`fuzz::pingpong::run`).
fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::pingpong::run(data));
}
