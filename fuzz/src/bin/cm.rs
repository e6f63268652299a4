//! AFL entry point of the `cm` target (`fuzz::cm::run`).
fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::cm::run(data));
}
