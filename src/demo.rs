//! Demo mode: the simulator with its demo fleet on a loopback port, a traffic generator
//! sending through it so that quota moves, and the exporter against it on short intervals.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::{App, AppError, WebOptions};
use crate::config::Config;

use mailhost_sim::{DemoTargets, RateLimit, Route, SimConfig, Simulator, traffic};

/// The simulator's management token in demo mode; it never leaves this process.
const DEMO_TOKEN: &str = "demo-management-token";
/// The demo fleet keeps its statistics in this zone.
const DEMO_TIMEZONE: &str = "Europe/Rome";
/// How often the traffic generator sends.
const TRAFFIC_TICK: Duration = Duration::from_secs(1);
/// Upper bound of demo send requests (about a day at one tick a second per account).
const TRAFFIC_MAX_REQUESTS: u64 = 400_000;

/// Runs the demo until `shutdown`; the simulated provider limits the demo token to
/// `rate_limit` requests per second (0: no limit; `--demo.rate-limit`, default
/// [`crate::cli::DEFAULT_DEMO_RATE_LIMIT`]).
pub async fn run(
    web: WebOptions,
    rate_limit: f64,
    shutdown: CancellationToken,
) -> Result<(), AppError> {
    let sim_config = SimConfig::demo(DEMO_TOKEN);
    let identities = sim_config.send_identities();
    let targets = sim_config.demo_targets();
    let sim = Simulator::new(sim_config);
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let sim_url = format!("http://{}", listener.local_addr()?);
    if rate_limit > 0.0 {
        let rate = rate_limit;
        let refused = |e: String| std::io::Error::other(format!("--demo.rate-limit: {e}"));
        sim.set_rate_limit(None, Some(RateLimit::per_second(rate)))
            .map_err(refused)?;
        // And the daily statistics on their own, at half of it.
        let daily = RateLimit::per_second((rate / 2.0).max(0.1));
        sim.set_route_rate_limit(None, Route::TracemailDaily, Some(daily))
            .map_err(refused)?;
        // The demo token is well known and the simulator listens on loopback only.
        tracing::info!(
            rate,
            change = %format!("curl -X PUT -H 'X-Api-Token: {DEMO_TOKEN}' -d '{{\"rate\": 5}}' {sim_url}/_sim/rate_limit"),
            lift = %format!("curl -X DELETE -H 'X-Api-Token: {DEMO_TOKEN}' {sim_url}/_sim/rate_limit"),
            "demo mode: the simulated provider rate-limits the demo token (429 with Retry-After past it), and its daily statistics at half of that; the config states both limits as a contract would (rate_limit, endpoint_rate_limits)"
        );
    }
    let sim_task = tokio::spawn(sim.serve(listener, shutdown.clone()));
    tokio::spawn(traffic::run(
        sim_url.clone(),
        identities,
        TRAFFIC_TICK,
        TRAFFIC_MAX_REQUESTS,
        shutdown.clone(),
    ));

    let path = web.telemetry_path.clone();
    let scheme = if web.web_config.tls().is_some() {
        "https"
    } else {
        "http"
    };
    let mut config = config(&sim_url, DEMO_TOKEN, &targets);
    if rate_limit > 0.0 {
        // The demo token's contract states both limits, as some providers' contracts do: the
        // pacer never goes past them (`rate_limit`, `endpoint_rate_limits`), and learns lower
        // ones from the answers when they are lowered at runtime.
        let daily = BTreeMap::from([("tracemail_daily".to_owned(), (rate_limit / 2.0).max(0.1))]);
        for api in
            std::iter::once(&mut config.api).chain(config.tenants.iter_mut().map(|t| &mut t.api))
        {
            api.rate_limit = Some(rate_limit);
            api.endpoint_rate_limits = daily.clone();
        }
    }
    let app = App::build(config, web).await?.with_demo_mode();
    let addr = app.local_addr();
    let host = if addr.ip().is_unspecified() {
        "localhost".to_owned()
    } else {
        addr.ip().to_string()
    };
    tracing::info!(simulator = %sim_url, "demo mode: simulated provider and traffic started");
    tracing::info!(url = %format!("{scheme}://{host}:{}{path}", addr.port()), landing_page = %format!("{scheme}://{host}:{}/", addr.port()), "demo mode: open this URL to see the metrics");
    app.run(shutdown).await?;
    let _ = sim_task.await;
    Ok(())
}

/// The demo configuration against a simulator at `sim_url`: every collector on a 5 s interval,
/// the demo fleet's targets and time zone. Tests use it too.
pub fn config(sim_url: &str, token: &str, targets: &DemoTargets) -> Config {
    Config::parse(&config_yaml(sim_url, targets), Some(token.to_owned()))
        .expect("the demo configuration is valid")
}

/// The demo configuration, written as a user would write it.
fn config_yaml(sim_url: &str, t: &DemoTargets) -> String {
    let list = |items: Vec<String>| items.join(", ");
    let accounts = list(t.accounts.iter().map(|a| a.to_string()).collect());
    let migrations = list(t.migrations.clone());
    let team_members = list(t.team_members.clone());
    let mailboxes = list(
        t.mailboxes
            .iter()
            .map(|(d, m)| format!("{{domain: {d}, mailbox: {m}}}"))
            .collect(),
    );
    let views = match (t.accounts.first(), t.domains.first()) {
        (Some(a), Some(d)) => format!("\n      - account: {a}\n      - domain: {d}"),
        _ => " []".to_owned(),
    };
    format!(
        "api:
  base_url: {sim_url}
  timeout: 3s
collectors:
  delivery_account:
    interval: 5s
    accounts: [{accounts}]
  tracemail_dashboard:
    interval: 5s
    timezone: {DEMO_TIMEZONE}
    views:{views}
  tracemail_daily:
    interval: 5s
    timezone: {DEMO_TIMEZONE}
    accounts: [{accounts}]
  migration:
    interval: 5s
    migrations: [{migrations}]
  mailbox:
    interval: 5s
    mailboxes: [{mailboxes}]
  team_member:
    interval: 30s
    team_members: [{team_members}]
"
    )
}
