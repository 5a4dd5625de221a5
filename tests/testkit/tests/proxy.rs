//! `FaultProxy` in front of a real redis-server, driven with the `redis` crate's sync client:
//! each fault does to a client what it promises, and the server sees what it should.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use polylock_testkit::{Fault, FaultProxy, RedisServer};
use redis::{Commands, Connection, RedisResult};

/// How long a client waits for a reply before calling it lost.
const REPLY_TIMEOUT: Duration = Duration::from_millis(400);

fn connect(url: &str) -> RedisResult<Connection> {
    let connection =
        redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(2))?;
    connection.set_read_timeout(Some(REPLY_TIMEOUT))?;
    Ok(connection)
}

fn ping(connection: &mut Connection) -> RedisResult<String> {
    redis::cmd("PING").query(connection)
}

/// Polls `check` every 10 ms for up to 5 s; true once it holds.
fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    check()
}

#[test]
fn pass_forwards_both_ways_and_counts_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    assert_ne!(proxy.port(), server.port());
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}", proxy.port()));
    assert_eq!(proxy.fault(), Fault::Pass);

    let mut first = connect(&proxy.url()).unwrap();
    let () = first.set("pass:key", "through").unwrap();
    assert_eq!(
        server.command(&["GET", "pass:key"]).as_deref(),
        Some("through")
    );
    let mut second = connect(&proxy.url()).unwrap();
    let value: String = second.get("pass:key").unwrap();
    assert_eq!(value, "through");
    assert_eq!(proxy.connections(), 2);

    drop(first);
    assert!(
        eventually(|| proxy.connections() == 1),
        "a closed client connection is no longer counted: {}",
        proxy.connections()
    );
    assert_eq!(ping(&mut second).unwrap(), "PONG");
}

#[test]
fn delay_holds_every_chunk_both_ways_on_open_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut connection = connect(&proxy.url()).unwrap();
    connection
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let delay = Duration::from_millis(250);

    proxy.set(Fault::Delay(delay));
    let started = Instant::now();
    assert_eq!(ping(&mut connection).unwrap(), "PONG");
    let delayed = started.elapsed();
    // The request waits once on its way in and the reply once on its way out.
    assert!(delayed >= delay * 2, "PING took {delayed:?}");

    proxy.set(Fault::Pass);
    let started = Instant::now();
    assert_eq!(ping(&mut connection).unwrap(), "PONG");
    assert!(
        started.elapsed() < delay,
        "after Pass, PING still took {:?}",
        started.elapsed()
    );
}

#[test]
fn chunks_keep_their_order_when_a_delay_ends() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut connection = connect(&proxy.url()).unwrap();
    connection
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let rpush = |item: &str| {
        redis::cmd("RPUSH")
            .arg("order:list")
            .arg(item)
            .get_packed_command()
    };

    proxy.set(Fault::Delay(Duration::from_millis(300)));
    connection.send_packed_command(&rpush("first")).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    proxy.set(Fault::Pass);
    // Due at once, but it must not overtake the delayed chunk ahead of it.
    connection.send_packed_command(&rpush("second")).unwrap();
    for _ in 0..2 {
        connection.recv_response().unwrap();
    }
    let list: Vec<String> = connection.lrange("order:list", 0, -1).unwrap();
    assert_eq!(list, ["first", "second"]);
}

#[test]
fn drop_replies_runs_the_command_but_the_client_never_hears_back() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut connection = connect(&proxy.url()).unwrap();

    proxy.set(Fault::DropReplies);
    let err = connection
        .set::<_, _, ()>("dropped:key", "ran")
        .unwrap_err();
    assert!(err.is_timeout(), "expected a reply timeout, got {err}");
    assert_eq!(
        server.command(&["GET", "dropped:key"]).as_deref(),
        Some("ran"),
        "the request reached Redis"
    );
    assert_eq!(proxy.connections(), 1, "the connection stays open");
    assert_eq!(proxy.replies_lost(), 1, "the reply is counted as lost");
}

#[test]
fn black_hole_forwards_nothing_and_accepts_silent_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut connection = connect(&proxy.url()).unwrap();

    proxy.set(Fault::BlackHole);
    let err = connection
        .set::<_, _, ()>("black-hole:key", "lost")
        .unwrap_err();
    assert!(err.is_timeout(), "expected a reply timeout, got {err}");
    assert_eq!(
        server.command(&["EXISTS", "black-hole:key"]).as_deref(),
        Some(":0"),
        "the request never reached Redis"
    );

    // A new connection is accepted (not refused) but its handshake is never answered.
    let err = redis::Client::open(proxy.url())
        .unwrap()
        .get_connection_with_timeout(REPLY_TIMEOUT)
        .map(|_| ())
        .unwrap_err();
    assert!(err.is_timeout(), "expected a timeout, got {err}");
    let _silent = TcpStream::connect(("127.0.0.1", proxy.port())).expect("accepted");
    assert!(
        eventually(|| proxy.connections() == 2),
        "the open connection and the silent one: {}",
        proxy.connections()
    );
}

#[test]
fn cut_after_forward_runs_the_command_then_drops_the_connection() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut connection = connect(&proxy.url()).unwrap();
    assert_eq!(proxy.replies_lost(), 0);

    proxy.set(Fault::CutAfterForward);
    let err = connection.incr::<_, _, i64>("cut:counter", 1).unwrap_err();
    assert!(
        !err.is_timeout(),
        "expected the connection to drop, not a timeout: {err}"
    );
    assert_eq!(
        server.command(&["GET", "cut:counter"]).as_deref(),
        Some("1"),
        "INCR ran before the connection dropped"
    );
    assert!(eventually(|| proxy.connections() == 0));
    assert_eq!(proxy.replies_lost(), 1, "the INCR's reply was cut");

    // New connections are cut too: the handshake's reply closes them.
    let err = connect(&proxy.url()).map(|_| ()).unwrap_err();
    assert!(
        !err.is_timeout() && !err.is_connection_refusal(),
        "expected a dropped connection, got {err}"
    );
    assert_eq!(proxy.replies_lost(), 2, "the handshake's reply was cut");

    proxy.set(Fault::Pass);
    let mut connection = connect(&proxy.url()).unwrap();
    let counter: i64 = connection.get("cut:counter").unwrap();
    assert_eq!(counter, 1, "INCR ran once");
    assert_eq!(proxy.replies_lost(), 2, "passed replies are not counted");
}

#[test]
fn refuse_closes_connections_and_the_port_then_listens_again_on_the_same_port() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let port = proxy.port();
    let mut open = connect(&proxy.url()).unwrap();

    proxy.set(Fault::Refuse);
    assert!(ping(&mut open).is_err(), "the open connection was closed");
    assert_eq!(proxy.connections(), 0);
    let err = connect(&proxy.url()).map(|_| ()).unwrap_err();
    assert!(err.is_connection_refusal(), "expected refused, got {err}");

    proxy.set(Fault::Pass);
    assert_eq!(proxy.port(), port);
    let mut connection = connect(&format!("redis://127.0.0.1:{port}")).unwrap();
    assert_eq!(ping(&mut connection).unwrap(), "PONG");
}

#[test]
fn refuse_for_refuses_then_passes_by_itself() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let refusal = Duration::from_millis(500);

    let refused_at = Instant::now();
    proxy.refuse_for(refusal);
    let err = connect(&proxy.url()).map(|_| ()).unwrap_err();
    assert!(err.is_connection_refusal(), "expected refused, got {err}");
    assert!(eventually(|| connect(&proxy.url()).is_ok()));
    assert!(
        refused_at.elapsed() >= refusal,
        "passed again after {:?}",
        refused_at.elapsed()
    );
    assert_eq!(proxy.fault(), Fault::Pass);
    assert_eq!(ping(&mut connect(&proxy.url()).unwrap()).unwrap(), "PONG");
}

#[test]
fn a_fault_set_during_refuse_for_is_not_undone_by_its_timer() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    proxy.refuse_for(Duration::from_millis(100));
    proxy.set(Fault::BlackHole);
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(proxy.fault(), Fault::BlackHole);
}

#[test]
fn cut_closes_open_connections_and_new_ones_pass() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let mut open = connect(&proxy.url()).unwrap();
    assert_eq!(ping(&mut open).unwrap(), "PONG");

    proxy.cut();
    assert_eq!(proxy.connections(), 0);
    let err = ping(&mut open).unwrap_err();
    assert!(!err.is_timeout(), "expected a closed connection, got {err}");

    let mut fresh = connect(&proxy.url()).unwrap();
    assert_eq!(ping(&mut fresh).unwrap(), "PONG");
    assert_eq!(proxy.connections(), 1);
    assert_eq!(proxy.fault(), Fault::Pass);
}

#[test]
fn dropping_the_proxy_closes_its_port_and_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let url = proxy.url();
    let mut open = connect(&url).unwrap();
    proxy.set(Fault::Delay(Duration::from_millis(50)));

    drop(proxy);
    assert!(ping(&mut open).is_err(), "the open connection was closed");
    let err = connect(&url).map(|_| ()).unwrap_err();
    assert!(err.is_connection_refusal(), "expected refused, got {err}");
}

#[test]
fn a_proxy_in_front_of_a_dead_server_drops_each_connection() {
    let mut server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    server.kill();
    let err = connect(&proxy.url()).map(|_| ()).unwrap_err();
    assert!(
        !err.is_connection_refusal() && !err.is_timeout(),
        "the proxy accepts, then closes: {err}"
    );
    assert_eq!(proxy.connections(), 0);
}
