//! The drop-in librdmacm's structures against rdma-core's `rdma_cma.h`:
//! a C program of ours (`layout_check.c`) compiled with the installed
//! headers compares every offset and size `src/abi.rs` lists.

use std::path::Path;
use std::process::Command;

use roce_xdp_rdmacm::abi::LAYOUT;

#[test]
fn structures_match_the_installed_rdma_cma_h() {
    let header = Path::new("/usr/include/rdma/rdma_cma.h");
    assert!(
        header.exists(),
        "{} is missing: install librdmacm-dev (scripts/setup-deps.sh)",
        header.display()
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rdmacm-layout");
    std::fs::create_dir_all(&dir).unwrap();
    let values: String = LAYOUT
        .iter()
        .map(|(expr, v)| format!("CHECK({expr}, {v});\n"))
        .collect();
    std::fs::write(dir.join("layout_values.h"), values).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/layout_check.c");
    let exe = dir.join("layout_check");
    let cc = Command::new("cc")
        .arg("-Wall")
        .arg("-I")
        .arg(&dir)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running cc (install gcc)");
    assert!(
        cc.status.success(),
        "compiling layout_check.c failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "layouts differ from the headers:\n{out}"
    );
    assert!(out.contains("ok sizeof(struct rdma_cm_id)"), "{out}");
    assert!(out.contains("0 mismatches"), "{out}");
}
