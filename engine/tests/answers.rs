//! Answers of every shape on kept-alive connections, read the same by both socket loops:
//! bodies spread over many reads, chunked bodies, and servers that close after answering.

mod common;

use common::{read_request, serve, BACKENDS};
use serde_json::json;
use tokio::io::AsyncWriteExt;

fn run(server: &common::TestServer, io: &str) -> serverlab_load::Summary {
    common::run_plan(
        json!({"target": server.url("/x"), "requests": 40, "connections": 3,
        "threads": 1, "io": io}),
    )
}

#[test]
fn large_bodies_arrive_whole() {
    const BODY: usize = 300_000;
    let server = serve(|mut stream, _| async move {
        while read_request(&mut stream).await.is_some() {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {BODY}\r\n\r\n");
            let mut answer = head.into_bytes();
            answer.resize(answer.len() + BODY, b'x');
            if stream.write_all(&answer).await.is_err() {
                return;
            }
        }
    });
    for io in BACKENDS {
        let s = run(&server, io);
        assert_eq!(
            (s.attempts.ok, s.errors.total()),
            (40, 0),
            "{io}: {:?}",
            s.errors
        );
        assert!(
            s.traffic.bytes_read >= 40 * BODY as u64,
            "{io}: {}",
            s.traffic.bytes_read
        );
        assert_eq!(s.traffic.connections_opened, 3, "{io}");
    }
}

#[test]
fn chunked_bodies_in_small_writes_are_read_to_their_end() {
    let server = serve(|mut stream, _| async move {
        while read_request(&mut stream).await.is_some() {
            let parts: [&[u8]; 4] = [
                b"HTTP/1.1 200 OK\r\nTransfer-",
                b"Encoding: chunked\r\n\r\n5\r\nhel",
                b"lo\r\n6\r\n world\r\n",
                b"0\r\n\r\n",
            ];
            for part in parts {
                if stream.write_all(part).await.is_err() {
                    return;
                }
                let _ = stream.flush().await;
                tokio::task::yield_now().await;
            }
        }
    });
    for io in BACKENDS {
        let s = run(&server, io);
        assert_eq!(
            (s.attempts.ok, s.errors.total()),
            (40, 0),
            "{io}: {:?}",
            s.errors
        );
        assert_eq!(s.traffic.connections_opened, 3, "{io}");
    }
}

#[test]
fn a_server_closing_after_each_answer_gets_a_new_connection_each_time() {
    let server = serve(|mut stream, _| async move {
        if read_request(&mut stream).await.is_some() {
            let answer = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    for io in BACKENDS {
        let s = run(&server, io);
        assert_eq!(
            (s.attempts.ok, s.errors.total()),
            (40, 0),
            "{io}: {:?}",
            s.errors
        );
        assert_eq!(s.traffic.connections_opened, 40, "{io}");
    }
}

#[test]
fn the_io_uring_loop_measures_how_long_answers_waited_to_be_read() {
    let server = common::perf_server();
    for io in BACKENDS {
        let s = common::run_plan(json!({"target": server.url("/perf"), "requests": 2000,
            "connections": 80, "threads": 1, "io": io}));
        assert_eq!(
            (s.attempts.ok, s.errors.total()),
            (2000, 0),
            "{io}: {:?}",
            s.errors
        );
        let notice = &s.timings.notice_us;
        if io == "io_uring" {
            // Connections 0 and 64 of the 80 carry the kernel's receive timestamps.
            assert!(
                notice.count > 0 && notice.count < s.attempts.ok / 2,
                "{notice:?}"
            );
            // An answer cannot wait longer to be read than its whole exchange took: a wrong
            // clock base would read as years or as nothing.
            assert!(
                notice.max <= s.timings.latency_us.max + 1_000,
                "{notice:?} {:?}",
                s.timings.latency_us
            );
        } else {
            assert_eq!(notice.count, 0, "the epoll loop does not sample");
        }
    }
}
