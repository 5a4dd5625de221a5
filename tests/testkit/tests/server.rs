//! `RedisServer`: the reply conventions of `command`/`int` (core and CLI tests rely on them),
//! the server-side faults `pause`, `kill_clients` and `restart`, and that the launcher only
//! takes a server for its own when it is its child.

use std::time::{Duration, Instant};

use polylock_testkit::RedisServer;
use redis::RedisResult;

fn ping(connection: &mut redis::Connection) -> RedisResult<String> {
    redis::cmd("PING").query(connection)
}

#[test]
fn command_writes_replies_as_their_first_resp_line() {
    let server = RedisServer::start();
    assert_eq!(server.command(&["PING"]).as_deref(), Some("+PONG"));
    assert_eq!(server.command(&["SET", "k", "v a"]).as_deref(), Some("+OK"));
    assert_eq!(server.command(&["GET", "k"]).as_deref(), Some("v a"));
    assert_eq!(server.command(&["GET", "missing"]).as_deref(), Some("$-1"));
    assert_eq!(
        server.command(&["RPUSH", "list", "a", "b"]).as_deref(),
        Some(":2")
    );
    assert_eq!(
        server.command(&["LRANGE", "list", "0", "-1"]).as_deref(),
        Some("*2")
    );
    let wrong_type = server.command(&["HGET", "k", "field"]).unwrap();
    assert!(wrong_type.starts_with("-WRONGTYPE "), "{wrong_type}");
    assert_eq!(server.int(&["INCR", "counter"]), 1);
    assert_eq!(server.int(&["EXISTS", "k", "counter", "missing"]), 2);
}

#[test]
#[should_panic(expected = "not an integer")]
fn int_panics_on_a_reply_that_is_not_an_integer() {
    let server = RedisServer::start();
    server.int(&["PING"]);
}

#[test]
fn command_is_none_when_nothing_listens() {
    let mut server = RedisServer::start();
    server.kill();
    assert_eq!(server.command(&["PING"]), None);
}

#[test]
fn pause_holds_commands_until_it_ends() {
    let server = RedisServer::start();
    let pause = Duration::from_millis(400);
    let started = Instant::now();
    server.pause(pause);
    assert_eq!(server.command(&["PING"]).as_deref(), Some("+PONG"));
    assert!(
        started.elapsed() >= pause,
        "PING answered after {:?}",
        started.elapsed()
    );
}

#[test]
fn kill_clients_closes_normal_connections_from_the_server_side() {
    let server = RedisServer::start();
    let mut connection = server.connection().unwrap();
    assert_eq!(ping(&mut connection).unwrap(), "PONG");
    assert_eq!(server.kill_clients("normal"), 1);
    assert!(
        ping(&mut connection).is_err(),
        "the killed connection fails"
    );
    assert_eq!(server.kill_clients("pubsub"), 0);
}

#[test]
fn restart_comes_back_on_the_same_port_with_the_same_arguments_and_no_data() {
    let mut server = RedisServer::start_with(&["--maxclients", "123"]);
    let port = server.port();
    let mut before = server.connection().unwrap();
    assert_eq!(server.command(&["SET", "k", "v"]).as_deref(), Some("+OK"));

    server.restart();
    assert_eq!(server.port(), port);
    assert!(
        ping(&mut before).is_err(),
        "connections to the old process are gone"
    );
    assert_eq!(server.command(&["GET", "k"]).as_deref(), Some("$-1"));
    let mut config: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxclients")
        .query(&mut server.connection().unwrap())
        .unwrap();
    assert_eq!(config.pop().as_deref(), Some("123"));
}

#[test]
fn a_server_is_not_started_on_a_port_another_server_took_meanwhile() {
    // Another process's server got the port between `free_port` and our launch: its PONG must
    // not pass for our child's (ours fails to bind and exits), or a test would run on it.
    let stranger = RedisServer::start();
    let started = RedisServer::start_on(stranger.port(), &[]);
    assert!(
        started.is_none(),
        "the launcher took the stranger's server on port {} for its own",
        stranger.port()
    );
    assert_eq!(stranger.command(&["PING"]).as_deref(), Some("+PONG"));
}
