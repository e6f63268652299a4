//! The drop-in librdmacm's structures against rdma-core's `rdma_cma.h`:
//! a C program of ours (`layout_check.c`) compiled with the installed
//! headers compares every offset and size `src/abi.rs` lists, with the
//! verbs ABI crate's harness (which checks the `verbs.h` structures in
//! its own layout test).

use std::path::Path;

use roce_xdp_rdmacm::abi::LAYOUT;
use verbs_abi::compile_and_run_layout_check;

#[test]
fn structures_match_the_installed_rdma_cma_h() {
    let header = Path::new("/usr/include/rdma/rdma_cma.h");
    assert!(
        header.exists(),
        "{} is missing: install librdmacm-dev (scripts/setup-deps.sh)",
        header.display()
    );
    let out = compile_and_run_layout_check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/layout_check.c"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("rdmacm-layout"),
        LAYOUT,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("ok sizeof(struct rdma_cm_id)"), "{out}");
    assert!(out.contains("0 mismatches"), "{out}");
}
