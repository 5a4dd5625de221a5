//! The server's work so far, as the measuring examples read it (`cycle_cost`, `contended_cost`).

/// The server's CPU seconds so far: `used_cpu_sys + used_cpu_user` (INFO cpu).
pub async fn server_cpu(con: &mut redis::aio::MultiplexedConnection) -> f64 {
    let cpu: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(con)
        .await
        .unwrap();
    cpu.lines()
        .filter(|line| line.starts_with("used_cpu_sys:") || line.starts_with("used_cpu_user:"))
        .filter_map(|line| line.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum()
}

/// The server's commands so far, scripts' inner calls included (INFO commandstats), the INFO
/// calls left out.
#[allow(dead_code)] // One of the examples that include this file reads no commands.
pub async fn server_commands(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap();
    stats
        .lines()
        .filter(|line| !line.starts_with("cmdstat_info:"))
        .filter_map(|line| {
            let calls = line.split("calls=").nth(1)?;
            calls.split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}
