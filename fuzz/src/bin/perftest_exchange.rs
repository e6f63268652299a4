//! AFL entry point of the `perftest_exchange` target
//! (`fuzz::perftest_exchange::run`).
fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::perftest_exchange::run(data));
}
