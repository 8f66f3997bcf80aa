//! The MCP endpoint's figures: `tools/list` latency over an open session, and the
//! delay from an admin's edit (`PUT .../prompt-template` over HTTP) to the
//! `notifications/tools/list_changed` an open session receives. loadout runs in
//! this process on a fresh SQLite file, served on 127.0.0.1; the client is rmcp's.
//! `cargo run --release -p loadout --example mcp_latency -- [LISTS] [EDITS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use loadout::app::AppState;
use loadout::auth::keys::{self, Role};
use loadout::connectors::client::Outbound;
use loadout::prompt::builder::SystemClock;
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use tokio::sync::mpsc;

struct Listener(mpsc::UnboundedSender<Instant>);

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.send(Instant::now()).ok();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let lists: usize = args.next().map_or(Ok(2000), |a| a.parse())?;
    let edits: usize = args.next().map_or(Ok(20), |a| a.parse())?;
    let dir = std::env::temp_dir().join(format!("loadout-mcp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url = format!("sqlite://{}/bench.db?mode=rwc", dir.display());
    let db = loadout::db::connect(&url).await?;
    loadout::db::migrate::apply(&db, loadout::db::migrate::MigrateCommand::Up { n: None }).await?;
    loadout::registry::seed::run(
        &db,
        &loadout::registry::catalog::Seeds::embedded()?,
        chrono::Utc::now(),
    )
    .await?;
    let admin = keys::create(&db, "admin", Role::Admin, chrono::Utc::now()).await?;
    let agent = keys::create(&db, "agent", Role::Agent, chrono::Utc::now()).await?;
    let state = AppState::new(
        db,
        loadout::app::Settings::from_env()?,
        loadout::secrets::Keyring::none(),
        Arc::new(SystemClock),
    )
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = loadout::http::router(state);
    // loadout's own connection loop, as `serve` runs it (TCP_NODELAY included).
    let limits =
        loadout::transport::server::Limits::from(&loadout::app::Settings::from_env()?.connections);
    tokio::spawn(loadout::transport::server::serve(
        listener,
        app,
        limits,
        std::future::pending(),
    ));

    let http = Outbound::new(vec!["127.0.0.1".parse()?], None)?
        .client()
        .clone();
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp/agents/assistant"))
            .auth_header(agent);
    let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
    let (tx, mut changes) = mpsc::unbounded_channel();
    let client = Listener(tx).serve(transport).await?;

    for _ in 0..50 {
        client.list_all_tools().await?;
    }
    let mut times = Vec::with_capacity(lists);
    let started = Instant::now();
    for _ in 0..lists {
        let t = Instant::now();
        let tools = client.list_all_tools().await?;
        times.push(t.elapsed());
        anyhow::ensure!(tools.len() == 23, "tools/list gave {} tools", tools.len());
    }
    let total = started.elapsed();
    times.sort();
    println!(
        "tools/list ({lists} calls, one session): p50 {:?}  p99 {:?}  max {:?}  {:.0} calls/s",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times[times.len() - 1],
        lists as f64 / total.as_secs_f64()
    );

    let mut delays = Vec::with_capacity(edits);
    for i in 0..edits {
        while changes.try_recv().is_ok() {}
        let sent = Instant::now();
        let response = http
            .put(format!("{base}/v1/agents/assistant/prompt-template"))
            .bearer_auth(&admin)
            .json(&serde_json::json!({"template": format!("Edit {i}. $soul")}))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "PUT answered {}",
            response.status()
        );
        let received = tokio::time::timeout(Duration::from_secs(5), changes.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the session closed"))?;
        delays.push(received.saturating_duration_since(sent));
    }
    delays.sort();
    println!(
        "edit → list_changed ({edits} edits, in process): p50 {:?}  max {:?}",
        percentile(&delays, 0.5),
        delays[delays.len() - 1]
    );
    client.cancel().await.ok();
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
