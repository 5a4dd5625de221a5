//! polylock's OpenTelemetry metrics scraped by Prometheus: the OpenTelemetry SDK with the
//! `opentelemetry-prometheus` exporter, one instrumented client, and a `/metrics` endpoint.
//!
//! Usage: `cargo run -p polylock --features opentelemetry --example prometheus -- <redis-url>
//! [listen-address]` (default `127.0.0.1:9464`). It makes some lock traffic on `orders:42` (acquires,
//! a wait that runs out, a hand-off), then answers every HTTP request with the Prometheus text of the
//! current values until it is stopped. `curl http://127.0.0.1:9464/metrics` shows what
//! Prometheus would scrape (docs/observability.md has one).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use polylock::{AcquireOptions, Client, ClientOptions, Hold};
use prometheus::{Encoder, TextEncoder};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .ok_or("usage: prometheus <redis-url> [listen-address]")?;
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:9464".to_owned());

    // The registry Prometheus scrapes; the exporter is the meter provider's reader.
    let registry = prometheus::Registry::new();
    let exporter = opentelemetry_prometheus::exporter()
        .with_registry(registry.clone())
        .build()?;
    let provider = SdkMeterProvider::builder().with_reader(exporter).build();

    let options = ClientOptions {
        name: Some("checkout-service".to_owned()),
        ..ClientOptions::default()
    };
    let client = Client::connect_with(&url, options).await?;
    let _instrumentation = polylock::otel::instrument(&client, &provider.meter("polylock"));

    traffic(&client).await?;

    let listener = TcpListener::bind(&listen)?;
    eprintln!("serving http://{listen}/metrics");
    for stream in listener.incoming() {
        let mut stream = stream?;
        // The request line and headers are read and ignored: every path gets the metrics.
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut line = String::new();
        while reader.read_line(&mut line)? > 2 {
            line.clear();
        }
        let mut body = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut body)?;
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            TextEncoder::new().format_type(),
            body.len()
        )?;
        stream.write_all(&body)?;
    }
    Ok(())
}

/// On one lock name: an acquire and release, then, while it is held, a second owner that gives
/// up after waiting 100 ms and a third that waits and gets it when the first releases.
async fn traffic(client: &Client) -> polylock::Result<()> {
    let guard = client.lock("orders:42")?.lock().await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    guard.release().await?;

    let held = client.lock("orders:42")?.lock().await?;
    let impatient = client.lock("orders:42")?;
    let options = AcquireOptions::new().wait(Duration::from_millis(100));
    assert!(impatient.try_lock_with(options).await?.is_none());
    let patient = client.lock("orders:42")?;
    let waiter = tokio::spawn(async move { patient.lock().await?.release().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    held.release().await?;
    waiter.await.expect("the waiter ran")?;
    Ok(())
}
