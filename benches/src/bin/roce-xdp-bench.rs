//! `roce-xdp-bench [--quick] [--json] [--out DIR]`: the end-to-end
//! harness on its own (the same as `roce-xdp bench`).

use roce_xdp_benches::frontend::{self, BenchArgs};

/// Large tables (an endpoint's QPs) in huge pages: `engine::io::HugePageAlloc`.
#[global_allocator]
static ALLOC: engine::io::HugePageAlloc = engine::io::HugePageAlloc;

fn main() {
    let args = match BenchArgs::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(2);
        }
    };
    if let Err(e) = frontend::run(&args) {
        eprintln!("roce-xdp-bench: {e}");
        std::process::exit(1);
    }
}
