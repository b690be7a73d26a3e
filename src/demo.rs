//! Demo mode: the simulator with its demo fleet on a loopback port, a traffic generator
//! sending through it so that quota moves, and the exporter against it on short intervals.

use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::{App, AppError, WebOptions};
use crate::config::Config;
use crate::sim::{SimConfig, Simulator, traffic};

/// The simulator's management token in demo mode; it never leaves this process.
const DEMO_TOKEN: &str = "demo-management-token";
/// How often the traffic generator sends.
const TRAFFIC_TICK: Duration = Duration::from_secs(1);
/// Upper bound of demo send requests (about a day at one tick a second per account).
const TRAFFIC_MAX_REQUESTS: u64 = 400_000;

pub async fn run(web: WebOptions, shutdown: CancellationToken) -> Result<(), AppError> {
    let sim_config = SimConfig::demo(DEMO_TOKEN);
    let identities = sim_config.send_identities();
    let accounts: Vec<i32> = sim_config.accounts.iter().map(|a| a.id).collect();
    let sim = Simulator::new(sim_config);
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let sim_url = format!("http://{}", listener.local_addr()?);
    let sim_task = tokio::spawn(sim.serve(listener, shutdown.clone()));
    tokio::spawn(traffic::run(
        sim_url.clone(),
        identities,
        TRAFFIC_TICK,
        TRAFFIC_MAX_REQUESTS,
        shutdown.clone(),
    ));

    let path = web.telemetry_path.clone();
    let app = App::build(Config::demo(sim_url.clone(), DEMO_TOKEN, accounts), web).await?;
    let addr = app.local_addr();
    let host = if addr.ip().is_unspecified() {
        "localhost".to_owned()
    } else {
        addr.ip().to_string()
    };
    tracing::info!(simulator = %sim_url, "demo mode: simulated provider and traffic started");
    tracing::info!(url = %format!("http://{host}:{}{path}", addr.port()), landing_page = %format!("http://{host}:{}/", addr.port()), "demo mode: open this URL to see the metrics");
    app.run(shutdown).await?;
    let _ = sim_task.await;
    Ok(())
}
