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

/// Status and `Retry-After` of a message sent through the Send API of the demo fleet, without a
/// send token: the handler refuses it 401, a fault answers before it.
async fn send(client: &reqwest::Client, url: &str) -> (u16, Option<String>) {
    let response = client
        .post(format!("{url}/v1/send"))
        .json(&mail("a@example.net", &["b@example.net"]))
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

/// The simulator's `/_sim/state`.
async fn state(client: &reqwest::Client, url: &str) -> Value {
    client
        .get(format!("{url}/_sim/state"))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("json")
}

#[tokio::test]
async fn without_outage_flags_the_binary_serves_a_healthy_demo_fleet() {
    let sim = start(&[]).await;
    let client = reqwest::Client::new();
    assert_eq!(account(&client, &sim.url).await, (200, None));
    let state = state(&client, &sim.url).await;
    assert_eq!(state["faults"], json!({}));
    assert_eq!(state["held_requests"], 0);
}

#[tokio::test]
async fn an_outage_answers_503_with_retry_after_on_every_route() {
    let sim = start(&[
        "--outage-for",
        "1h",
        "--outage-status",
        "503",
        "--outage-retry-after",
        "10",
    ])
    .await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        assert_eq!(
            account(&client, &sim.url).await,
            (503, Some("10".to_owned()))
        );
        assert_eq!(send(&client, &sim.url).await, (503, Some("10".to_owned())));
    }
    // The control plane stays up, and shows the fault on every route.
    let faults = state(&client, &sim.url).await["faults"].clone();
    assert_eq!(faults.as_object().map(|f| f.len()), Some(Route::ALL.len()));
    assert_eq!(faults["send"]["lasts_ms"], 3_600_000);
    assert_eq!(faults["send"]["error_retry_after_secs"], 10);
}

#[tokio::test]
async fn an_outage_ends_after_its_length() {
    let started = std::time::Instant::now();
    let sim = start(&["--outage-for", "2s"]).await;
    let client = reqwest::Client::new();
    let first = account(&client, &sim.url).await;
    assert!(
        first == (503, None) || started.elapsed() >= Duration::from_secs(2),
        "{first:?} within the outage"
    );
    let deadline = std::time::Instant::now() + PATIENCE;
    while account(&client, &sim.url).await.0 != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "the outage never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(started.elapsed() >= Duration::from_secs(2));
    // The Send API's handler answers again: a message without a send token is refused.
    assert_eq!(send(&client, &sim.url).await.0, 401);
}

#[tokio::test]
async fn an_outage_later_leaves_the_api_healthy_until_it_starts() {
    let sim = start(&["--outage-after", "1h", "--outage-for", "1m"]).await;
    let client = reqwest::Client::new();
    assert_eq!(account(&client, &sim.url).await, (200, None));
    let faults = state(&client, &sim.url).await["faults"].clone();
    assert_eq!(faults["delivery_account_get"]["starts_after_ms"], 3_600_000);
    assert_eq!(faults["delivery_account_get"]["lasts_ms"], 60_000);
    assert_eq!(faults["delivery_account_get"]["error_status"], 503);
}

#[tokio::test]
async fn an_outage_without_answers_holds_requests_until_the_client_gives_up() {
    let sim = start(&["--outage-for", "1h", "--outage-no-answer"]).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .expect("client");
    let error = impatient
        .get(format!("{}/api/delivery/accounts/{DEMO_BUSY}", sim.url))
        .header(MANAGEMENT_TOKEN_HEADER, TOKEN)
        .send()
        .await
        .expect_err("no answer");
    assert!(error.is_timeout(), "{error:?}");
    let state = state(&reqwest::Client::new(), &sim.url).await;
    assert_eq!(state["faults"]["send"]["no_answer_rate"], 1.0);
}

#[tokio::test]
async fn bad_outage_flags_are_refused_naming_the_flag() {
    let cases: [(&[&str], &str); 7] = [
        (
            &["--outage-for", "1s", "--outage-status", "200"],
            "--outage-status must be an HTTP error status (400-599), got 200",
        ),
        (
            &["--outage-for", "1s", "--outage-retry-after", "86401"],
            "--outage-retry-after must be at most 86400 (a day), got 86401",
        ),
        (
            &["--outage-for", "0s"],
            "--outage-for must be at least 1ms: omit it for an outage until the end",
        ),
        (
            &["--outage-after", "8days"],
            "--outage-after (in milliseconds) must be at most 604800000 (a week), got 691200000",
        ),
        (&["--outage-status", "503"], "--outage-after"),
        (
            &[
                "--outage-for",
                "1s",
                "--outage-no-answer",
                "--outage-retry-after",
                "5",
            ],
            "cannot be used with",
        ),
        (
            &[
                "--outage-for",
                "1s",
                "--outage-no-answer",
                "--outage-status",
                "502",
            ],
            "cannot be used with",
        ),
    ];
    for (args, expected) in cases {
        let message = refused(args).await;
        assert!(message.contains(expected), "{args:?}: {message}");
    }
}
