//! The verbs structures against rdma-core's `verbs.h`: a C program of
//! ours (`layout_check.c`) compiled with the installed header compares
//! every offset, size and constant `src/lib.rs` relies on (struct layouts
//! and the ops tables the inline verbs call through).

use std::path::Path;

use verbs_abi::{compile_and_run_layout_check, LAYOUT};

#[test]
fn structures_match_the_installed_verbs_h() {
    let header = Path::new("/usr/include/infiniband/verbs.h");
    assert!(
        header.exists(),
        "{} is missing: install libibverbs-dev (scripts/setup-deps.sh does)",
        header.display()
    );
    let out = compile_and_run_layout_check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/layout_check.c"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("verbs-abi-layout"),
        LAYOUT,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("ok sizeof(struct verbs_context)"), "{out}");
    assert!(
        out.contains("ok sizeof(struct ibv_srq_init_attr_ex)"),
        "{out}"
    );
    assert!(out.contains("0 mismatches"), "{out}");
}
