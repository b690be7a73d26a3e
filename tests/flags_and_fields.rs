//! Every flag and every config field against hostile values (empty, huge, negative, not a
//! number, unicode, path and route syntax, very long): each gives a clear error that names it,
//! or a clean start; none reaches a panic. The flags are read from `--help`, so a new flag is
//! covered without a change here; the fields are those of two configs that name every key, one
//! with a single token and one with `tenants:`.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mailhost_exporter::config::Config;

/// Values no flag or field should panic on.
fn hostile() -> Vec<String> {
    [
        "",
        " ",
        "0",
        "-1",
        "1e999",
        "NaN",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999h",
        "é漢🦀",
        "/{*rest}",
        "/:x",
        "/*x",
        "//",
        "../../etc/passwd",
        "a\tb",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(std::iter::once("x".repeat(5000)))
    .collect()
}

/// The flags that take a value, as `--help` lists them.
fn flags_with_values() -> Vec<String> {
    let help = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    let flags: Vec<String> = text
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("--") && l.contains(" <"))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(flags.len() >= 10, "read the flags from --help: {flags:?}");
    flags
}

/// How one start with a hostile flag value ended.
struct Outcome {
    /// `None` when it was still running (a clean start) and was stopped.
    code: Option<i32>,
    stderr: String,
}

/// How long a start may take to refuse its flags: every check runs before anything is served,
/// in milliseconds; a process still running after this has started, and is stopped.
const REFUSAL_WINDOW: Duration = Duration::from_secs(3);

/// The binary with `args`, until it exits, or stopped once it has clearly started.
fn start(args: &[String]) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mailhost_exporter"))
        .args(args)
        .env_remove("MAILHOST_API_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > REFUSAL_WINDOW {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if code.is_none() {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        if child.wait().is_err() {
            let _ = child.kill();
        }
    }
    Outcome {
        code,
        stderr: reader.join().unwrap_or_default(),
    }
}

#[test]
fn no_flag_value_reaches_a_panic_and_every_refusal_names_its_flag() {
    let flags = flags_with_values();
    let mut cases: Vec<(String, String)> = Vec::new();
    for flag in &flags {
        for value in hostile() {
            cases.push((flag.clone(), value));
        }
    }
    // Four starts at a time: each is its own process.
    let results: Vec<(String, String, Outcome)> = std::thread::scope(|scope| {
        let chunks: Vec<Vec<(String, String)>> = cases
            .chunks(cases.len().div_ceil(4))
            .map(<[_]>::to_vec)
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|(flag, value)| {
                            let mut args = vec!["--demo".to_owned()];
                            // Only loopback, whatever the case: a hostile listen address is the
                            // value itself (none of them names another interface).
                            if flag != "--web.listen-address" {
                                args.push("--web.listen-address=127.0.0.1:0".to_owned());
                            }
                            args.push(format!("{flag}={value}"));
                            let outcome = start(&args);
                            (flag, value, outcome)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut problems = Vec::new();
    for (flag, value, outcome) in &results {
        let shown = if value.len() > 20 {
            format!("{}… ({} chars)", &value[..20], value.len())
        } else {
            value.clone()
        };
        if outcome.code == Some(101) || outcome.stderr.contains("panic") {
            problems.push(format!("{flag}={shown:?}: panicked\n{}", outcome.stderr));
            continue;
        }
        if let Some(code) = outcome.code
            && code != 0
            && !outcome.stderr.contains(flag.as_str())
        {
            problems.push(format!(
                "{flag}={shown:?}: exit {code} without naming the flag:\n{}",
                outcome.stderr
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} starts:\n{}",
        problems.len(),
        results.len(),
        problems.join("\n")
    );
}

/// The leaf paths of a YAML document: a key path and each list item.
fn leaves(value: &serde_yaml_ng::Value, path: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    match value {
        serde_yaml_ng::Value::Mapping(m) => {
            for (k, v) in m {
                path.push(PathStep::Key(k.as_str().unwrap().to_owned()));
                leaves(v, path, out);
                path.pop();
            }
        }
        serde_yaml_ng::Value::Sequence(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(PathStep::Index(i));
                leaves(v, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

#[derive(Clone, Debug)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn set(value: &mut serde_yaml_ng::Value, path: &[PathStep], to: serde_yaml_ng::Value) {
    let mut at = value;
    for step in path {
        at = match step {
            PathStep::Key(k) => at.get_mut(k.as_str()).unwrap(),
            PathStep::Index(i) => at.get_mut(*i).unwrap(),
        };
    }
    *at = to;
}

/// The last key of a path: the field an error must name.
fn field(path: &[PathStep]) -> String {
    path.iter()
        .rev()
        .find_map(|s| match s {
            PathStep::Key(k) => Some(k.clone()),
            PathStep::Index(_) => None,
        })
        .unwrap()
}

const SINGLE_TOKEN: &str = "
api:
  base_url: https://api.example.net
  token_file: TOKEN_FILE
  timeout: 10s
  concurrency: 8
  rate_limit: 50
  max_response_bytes: 4194304
  max_retries: 2
  retry_backoff: 250ms
  retry_max_backoff: 5s
  circuit_breaker_failures: 5
  circuit_breaker_cooldown: 60s
  proxy_url: http://proxy.example.net:3128
  no_proxy: localhost,.internal
  tls_config:
    server_name: api.example.net
    min_version: TLS12
collectors:
  delivery_account:
    enabled: true
    interval: 60s
    deadline: 48s
    max_age: 180s
    accounts: [1001, 1002]
  tracemail_dashboard:
    enabled: true
    interval: 60s
    deadline: 48s
    max_age: 180s
    timezone: Europe/Rome
    date_format: YYYY-MM-DD
    limit: 10
    views: [{account: 1001}, {domain: shop.example}]
  tracemail_daily:
    enabled: true
    interval: 60s
    deadline: 48s
    max_age: 180s
    timezone: Europe/Rome
    date_format: YYYY-MM-DD
    top_domains: 20
    accounts: [1001]
  migration:
    enabled: true
    interval: 60s
    deadline: 48s
    max_age: 180s
    migrations: [MG00000001]
  mailbox:
    enabled: true
    interval: 60s
    deadline: 48s
    max_age: 180s
    mailboxes: [{domain: D000000001, mailbox: EA00000001}]
probe:
  idle_intervals: 3
  max_targets: 100
  new_per_interval: 100
  first_fetches: 16
  allow: [1001]
discovery:
  accounts: true
  domains: true
  max_accounts: 10
  max_domains: 10
  allow: [1001]
  deny: [1002]
";

const TENANTS: &str = "
api:
  base_url: https://api.example.net
  concurrency: 8
collectors:
  delivery_account:
    interval: 60s
  tracemail_daily:
    interval: 60s
tenants:
  - name: acme
    token_env: ACME_TOKEN
    base_url: https://other.example.net
    concurrency: 4
    rate_limit: 20
    collectors:
      delivery_account:
        accounts: [1001]
      tracemail_daily:
        accounts: [1001]
    probe:
      max_targets: 10
      new_per_interval: 5
      first_fetches: 2
      allow: [1001]
    discovery:
      accounts: true
      max_accounts: 5
  - name: bravo
    token_file: TOKEN_FILE
";

#[test]
fn no_config_value_reaches_a_panic_and_every_refusal_names_a_field() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "a-good-token\n").unwrap();
    let env = |_: &str| Some("a-good-token".to_owned());
    let mut checked = 0;
    let mut problems = Vec::new();
    for template in [SINGLE_TOKEN, TENANTS] {
        let text = template.replace("TOKEN_FILE", &token_file.display().to_string());
        assert!(
            Config::parse_with_env(&text, &env).is_ok(),
            "the full config is valid:\n{text}"
        );
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        let mut paths = Vec::new();
        leaves(&doc, &mut Vec::new(), &mut paths);
        for path in &paths {
            for raw in hostile() {
                let value = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&raw)
                    .unwrap_or(serde_yaml_ng::Value::String(raw.clone()));
                for to in [value, serde_yaml_ng::Value::String(raw.clone())] {
                    let mut changed = doc.clone();
                    set(&mut changed, path, to);
                    let yaml = serde_yaml_ng::to_string(&changed).unwrap();
                    checked += 1;
                    let result = std::panic::catch_unwind(|| {
                        Config::parse_with_env(&yaml, &env).map_err(|e| e.to_string())
                    });
                    let name = field(path);
                    match result {
                        Err(_) => problems.push(format!("{path:?} = {raw:.20?}: panicked")),
                        Ok(Err(e)) => {
                            let names_a_field = e.contains(&name)
                                || ["api", "collectors", "tenants", "probe", "discovery"]
                                    .iter()
                                    .any(|p| e.starts_with(p));
                            if !names_a_field {
                                problems.push(format!("{path:?} = {raw:.20?}: {e}"));
                            }
                            if e.contains("a-good-token") {
                                problems.push(format!("{path:?}: the token is shown: {e}"));
                            }
                        }
                        Ok(Ok(_)) => {}
                    }
                }
            }
        }
    }
    assert!(checked > 1000, "{checked} configs checked");
    assert!(
        problems.is_empty(),
        "{} of {checked}:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
