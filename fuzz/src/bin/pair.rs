//! AFL entry point of the `pair` target (`fuzz::pair::run`).
fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::pair::run(data));
}
