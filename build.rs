//! Build facts for `mailhost_build_info` and `--version`: the git revision and rustc version.

use std::process::Command;

fn main() {
    let revision = std::env::var("MAILHOST_BUILD_REVISION")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_owned())
        });
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.split_whitespace().nth(1).map(str::to_owned));
    println!(
        "cargo:rustc-env=MAILHOST_BUILD_REVISION={}",
        revision.unwrap_or_else(|| "unknown".to_owned())
    );
    println!(
        "cargo:rustc-env=MAILHOST_RUSTC_VERSION={}",
        rustc_version.unwrap_or_else(|| "unknown".to_owned())
    );
    println!("cargo:rerun-if-env-changed=MAILHOST_BUILD_REVISION");
    println!("cargo:rerun-if-changed=.git/HEAD");
    // A commit moves the branch HEAD names, not HEAD itself: watch the branch's ref too (and
    // the packed refs, where git moves it on a `gc`), where they exist.
    let mut watched = vec![".git/packed-refs".to_owned()];
    if let Ok(head) = std::fs::read_to_string(".git/HEAD")
        && let Some(branch) = head.strip_prefix("ref: ")
    {
        watched.push(format!(".git/{}", branch.trim()));
    }
    for path in watched.iter().filter(|p| std::path::Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}
