//! The `mailhost_sim` binary as a benchmark starts it: its flags, what they make the simulator
//! answer over a real socket, and the messages refusing bad values.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::helpers::*;

/// Longest wait for the binary to start listening, or to exit on a bad flag.
const PATIENCE: Duration = Duration::from_secs(30);

/// The binary with `args`, listening on a free loopback port, the management token [`TOKEN`].
fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mailhost_sim"));
    command
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env("MAILHOST_SIM_TOKEN", TOKEN)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// A running binary and its base URL, read back from its log; dropped, it is killed.
struct Running {
    _child: Child,
    url: String,
}

async fn start(args: &[&str]) -> Running {
    let mut child = command(args).spawn().expect("spawn mailhost_sim");
    let stderr = child.stderr.take().expect("piped stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = tokio::time::timeout(PATIENCE, async {
        while let Some(line) = lines.next_line().await.expect("read the log") {
            if line.contains("simulated provider listening")
                && let Some(rest) = line.split("url=").nth(1)
            {
                return rest.split_whitespace().next().map(str::to_owned);
            }
        }
        None
    })
    .await
    .expect("the simulator starts within the patience")
    .expect("a listening line with its URL");
    // Keep reading the log so the binary never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Running { _child: child, url }
}

/// The exit status and log of a binary expected to refuse its flags.
async fn refused(args: &[&str]) -> String {
    let output = tokio::time::timeout(PATIENCE, command(args).output())
        .await
        .expect("the binary exits within the patience")
        .expect("run mailhost_sim");
    assert!(!output.status.success(), "{args:?} was accepted");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Status and `Retry-After` of one call of the demo fleet's first account.
async fn account(client: &reqwest::Client, url: &str) -> (u16, Option<String>) {
    let response = client
        .get(format!("{url}/api/delivery/accounts/{DEMO_BUSY}"))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect("an answer");
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (response.status().as_u16(), retry_after)
}

#[tokio::test]
async fn rate_limit_status_makes_the_binary_throttle_with_503_and_retry_after() {
    let sim = start(&[
        "--rate-limit",
        "0.01",
        "--rate-limit-burst",
        "1",
        "--rate-limit-status",
        "503",
    ])
    .await;
    let client = reqwest::Client::new();
    assert_eq!(account(&client, &sim.url).await, (200, None));
    // One token in a hundred seconds: the refusal says so.
    assert_eq!(
        account(&client, &sim.url).await,
        (503, Some("100".to_owned()))
    );
}

#[tokio::test]
async fn a_rate_limit_status_that_is_no_refusal_or_without_a_limit_is_refused() {
    let message = refused(&["--rate-limit", "5", "--rate-limit-status", "500"]).await;
    assert!(
        message.contains("--rate-limit-status must be one of 429, 503, 502, 504, 403, got 500"),
        "{message}"
    );
    let message = refused(&["--rate-limit-status", "503"]).await;
    assert!(message.contains("--rate-limit"), "{message}");
    let message = refused(&["--rate-limit", "5", "--rate-limit-status", "slow"]).await;
    assert!(message.contains("--rate-limit-status"), "{message}");
}
