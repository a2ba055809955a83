//! The slot's state machine, driven by hand the way the kernel would: each test hands it the
//! completions a ring would report, in the order the kernel posts them, and reads what it asks
//! for next. Receives write into the spare room the slot named, as the kernel does.

use std::time::{Duration, Instant};

use super::*;

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
const CLOSING: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
const TIMEOUT: Duration = Duration::from_secs(1);

/// A connection per request, each answer received by a receive linked behind the send.
fn new_connection() -> Rules {
    Rules {
        keep_alive: false,
        head_request: false,
        multishot: false,
        timeout: TIMEOUT,
        await_close: false,
    }
}

/// Kept-alive connections, with a receive behind every send (no provided buffers).
fn kept_alive() -> Rules {
    Rules {
        keep_alive: true,
        ..new_connection()
    }
}

/// Kept-alive connections, each with a multishot receive standing on it.
fn multishot() -> Rules {
    Rules {
        multishot: true,
        ..kept_alive()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Begins an attempt that must not open a connection (it reuses the slot's).
fn begin_on_kept(slot: &mut Slot, rules: &Rules, now: Instant) -> Next {
    slot.begin(rules, now, 0, || panic!("the kept connection is reused"))
}

/// Begins an attempt on a new connection, which opens.
fn begin_new(slot: &mut Slot, rules: &Rules, now: Instant) -> Next {
    let mut opened = 0;
    let next = slot.begin(rules, now, 0, || {
        opened += 1;
        Ok(())
    });
    assert_eq!(opened, 1, "one connection opened");
    next
}

/// The kernel's side of a single receive: `bytes` written where the slot said, then reported.
fn deliver(slot: &mut Slot, rules: &Rules, now: Instant, spare: Spare, bytes: &[u8]) -> Next {
    assert!(
        bytes.len() <= spare.len as usize,
        "the receive's room holds it"
    );
    // SAFETY: `spare` is the free room of the slot's inbox, which nothing touches until
    // this receive is reported.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), spare.ptr, bytes.len()) };
    let generation = slot.generation();
    slot.on_completion(rules, now, generation, Op::Recv, bytes.len() as i32)
}

fn report(slot: &mut Slot, rules: &Rules, now: Instant, op: Op, result: i32) -> Next {
    let generation = slot.generation();
    slot.on_completion(rules, now, generation, op, result)
}

fn arrive(slot: &mut Slot, rules: &Rules, now: Instant, more: bool, arrival: Arrival) -> Next {
    let generation = slot.generation();
    slot.on_multishot(rules, now, generation, more, arrival)
}

fn status(next: &Next) -> Option<u16> {
    match next.ended {
        Some(Ended::Answered { answer, .. }) => Some(answer.status),
        _ => None,
    }
}

/// A slot of a new-connection plan whose attempt is connected and waiting for its answer;
/// returns the receive's room.
fn connected_attempt(slot: &mut Slot, rules: &Rules, t0: Instant) -> Spare {
    let next = begin_new(slot, rules, t0);
    let spare = next.recv.expect("a receive behind the send");
    assert_eq!(report(slot, rules, t0 + ms(1), Op::Connect, 0).ended, None);
    spare
}

#[test]
fn a_first_attempt_connects_sends_and_receives_in_one_linked_chain() {
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let next = slot.begin(&new_connection(), t0, 3, || Ok(()));
    let exchange = Exchange {
        request: 3,
        connect: true,
    };
    assert_eq!(next.send, Some(exchange));
    assert!(next.recv.is_some_and(|spare| spare.len > 0));
    assert_eq!((next.ended, next.close, next.begin), (None, false, false));
    assert!(slot.in_attempt() && slot.is_busy());
}

#[test]
fn a_new_connection_is_answered_closed_and_the_next_attempt_opens_another() {
    let rules = new_connection();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = begin_new(&mut slot, &rules, t0).recv.unwrap();
    let first = slot.generation();
    let next = report(&mut slot, &rules, t0 + ms(2), Op::Connect, 0);
    assert_eq!(
        next.connected,
        Some(ms(2)),
        "connect time from the attempt's start"
    );
    assert_eq!(
        (next.recv, next.begin),
        (None, false),
        "the linked receive still stands"
    );
    let next = deliver(&mut slot, &rules, t0 + ms(5), spare, OK);
    match next.ended {
        Some(Ended::Answered {
            began,
            answer,
            done,
        }) => {
            assert_eq!(done, t0 + ms(5));
            assert_eq!((began, answer.status), (t0, 200));
            assert_eq!(answer.first_byte, t0 + ms(5));
        }
        other => panic!("answered, not {other:?}"),
    }
    assert_eq!(next.read, OK.len());
    assert!(next.close && next.begin && !next.shutdown);
    assert_eq!(
        slot.generation(),
        first + 1,
        "its reports are told from the next's"
    );
    assert!(
        begin_new(&mut slot, &rules, t0 + ms(6))
            .send
            .unwrap()
            .connect
    );
}

#[test]
fn an_answer_cut_anywhere_asks_for_the_rest_and_completes_once() {
    let rules = new_connection();
    let t0 = Instant::now();
    for cut in 1..OK.len() {
        let mut slot = Slot::default();
        let spare = connected_attempt(&mut slot, &rules, t0);
        let next = deliver(&mut slot, &rules, t0 + ms(2), spare, &OK[..cut]);
        assert_eq!((next.ended, next.read, next.close), (None, cut, false));
        let spare = next.recv.expect("a receive for the rest");
        let next = deliver(&mut slot, &rules, t0 + ms(3), spare, &OK[cut..]);
        assert_eq!(status(&next), Some(200), "cut at {cut}");
        match next.ended {
            Some(Ended::Answered { answer, .. }) => assert_eq!(answer.first_byte, t0 + ms(2)),
            _ => unreachable!(),
        }
        assert!(next.close && next.begin);
    }
}

#[test]
fn a_close_in_the_middle_of_an_answer_fails_it_as_closed() {
    let rules = new_connection();
    let t0 = Instant::now();
    for cut in [0, 10, OK.len() - 1] {
        let mut slot = Slot::default();
        let spare = connected_attempt(&mut slot, &rules, t0);
        if cut > 0 {
            assert!(deliver(&mut slot, &rules, t0, spare, &OK[..cut])
                .recv
                .is_some());
        }
        let next = report(&mut slot, &rules, t0 + ms(3), Op::Recv, 0);
        assert_eq!(
            next.ended,
            Some(Ended::Failed(ErrorKind::Closed)),
            "cut {cut}"
        );
        assert!(next.close && next.begin && next.recv.is_none());
    }
}

#[test]
fn a_close_completes_an_answer_whose_body_runs_to_the_close() {
    let rules = kept_alive();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let next = deliver(&mut slot, &rules, t0, spare, b"HTTP/1.0 200 OK\r\n\r\nbody");
    assert_eq!(next.ended, None, "the body lasts until the close");
    let next = report(&mut slot, &rules, t0 + ms(4), Op::Recv, 0);
    assert_eq!(status(&next), Some(200));
    assert!(
        next.close,
        "a kept-alive plan does not keep a closed connection"
    );
    assert!(
        begin_new(&mut slot, &rules, t0 + ms(5))
            .send
            .unwrap()
            .connect
    );
}

#[test]
fn a_refused_connect_fails_once_and_the_next_attempt_waits_for_the_linked_operations() {
    let rules = new_connection();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    begin_new(&mut slot, &rules, t0);
    let next = report(&mut slot, &rules, t0, Op::Connect, -libc::ECONNREFUSED);
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Connect)));
    assert_eq!(next.connected, None);
    assert!(
        next.shutdown && !next.close && !next.begin,
        "the receive is still out"
    );
    // The send and the receive linked behind the connect come back cancelled.
    let next = report(&mut slot, &rules, t0, Op::Send, -libc::ECANCELED);
    assert_eq!(next, Next::default());
    let next = report(&mut slot, &rules, t0, Op::Recv, -libc::ECANCELED);
    assert_eq!(next.ended, None, "counted once, with the connect");
    assert!(next.close && next.begin && !slot.is_busy());
}

#[test]
fn a_refused_connect_with_a_multishot_receive_closes_at_once_and_ignores_the_late_send() {
    let rules = multishot();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let next = begin_new(&mut slot, &rules, t0);
    assert_eq!((next.recv, next.arm), (None, false), "armed once connected");
    let old = slot.generation();
    let next = report(&mut slot, &rules, t0, Op::Connect, -libc::ECONNREFUSED);
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Connect)));
    assert!(next.close && next.begin && !next.arm);
    // The send linked behind the connect reports its cancellation about a closed connection.
    let late = slot.on_completion(&rules, t0, old, Op::Send, -libc::ECANCELED);
    assert_eq!(late, Next::default());
}

#[test]
fn a_connect_starved_of_ports_pauses_the_slot_until_the_tick_after_the_pause() {
    let rules = new_connection();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let next = begin_new(&mut slot, &rules, t0);
    report(&mut slot, &rules, t0, Op::Connect, -libc::EADDRNOTAVAIL);
    report(&mut slot, &rules, t0, Op::Send, -libc::ECANCELED);
    let next_after = report(&mut slot, &rules, t0, Op::Recv, -libc::ECANCELED);
    assert!(next.recv.is_some() && next_after.close && !next_after.begin);
    assert_eq!(slot.tick(&rules, t0 + ms(1)), Next::default());
    assert!(slot.tick(&rules, t0 + STARVED_PAUSE + ms(1)).begin);
}

#[test]
fn a_socket_that_cannot_be_opened_fails_the_attempt_and_pauses_the_slot() {
    let rules = new_connection();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let next = slot.begin(&rules, t0, 0, || Err(ErrorKind::FdsExhausted));
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::FdsExhausted)));
    assert_eq!((next.send, next.close, next.begin), (None, false, false));
    assert!(!slot.in_attempt() && !slot.is_busy());
    assert!(!slot.tick(&rules, t0 + ms(1)).begin);
    assert!(slot.tick(&rules, t0 + STARVED_PAUSE).begin);
    assert!(
        begin_new(&mut slot, &rules, t0 + STARVED_PAUSE)
            .send
            .unwrap()
            .connect
    );
}

#[test]
fn a_short_or_failed_send_fails_the_attempt_as_a_reset() {
    let rules = kept_alive();
    let t0 = Instant::now();
    for result in [17, 0, -libc::EPIPE, -libc::ECONNRESET] {
        let mut slot = Slot::default();
        connected_attempt(&mut slot, &rules, t0);
        let next = report(&mut slot, &rules, t0, Op::Send, result);
        assert_eq!(
            next.ended,
            Some(Ended::Failed(ErrorKind::Reset)),
            "{result}"
        );
        assert!(
            next.shutdown && !next.begin,
            "the linked receive is cut short"
        );
        let next = report(&mut slot, &rules, t0, Op::Recv, -libc::ECANCELED);
        assert_eq!(next.ended, None);
        assert!(next.close && next.begin);
    }
}

#[test]
fn a_cancelled_receive_reported_before_its_failed_send_still_ends_the_attempt_once() {
    let rules = kept_alive();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    connected_attempt(&mut slot, &rules, t0);
    let next = report(&mut slot, &rules, t0, Op::Recv, -libc::ECANCELED);
    assert_eq!(next.ended, None);
    assert!(
        next.recv.is_some(),
        "the attempt still waits for its answer"
    );
    let next = report(&mut slot, &rules, t0, Op::Send, -libc::EPIPE);
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Reset)));
    assert!(next.shutdown);
    let next = report(&mut slot, &rules, t0, Op::Recv, 0);
    assert_eq!(next.ended, None, "a drained receive is not acted on");
    assert!(next.close && next.begin);
}

#[test]
fn an_overdue_attempt_times_out_once_and_its_receive_is_cut_short() {
    let rules = new_connection();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    connected_attempt(&mut slot, &rules, t0);
    assert_eq!(
        slot.tick(&rules, t0 + TIMEOUT),
        Next::default(),
        "not yet over"
    );
    let next = slot.tick(&rules, t0 + TIMEOUT + ms(1));
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Timeout)));
    assert!(next.shutdown && !next.close && !next.begin);
    assert_eq!(slot.tick(&rules, t0 + TIMEOUT * 2), Next::default(), "once");
    // The shutdown makes the receive come back (empty), which is not a second failure.
    let next = report(&mut slot, &rules, t0 + TIMEOUT * 2, Op::Recv, 0);
    assert_eq!(next.ended, None);
    assert!(next.close && next.begin);
}

#[test]
fn a_timeout_while_connecting_waits_for_the_connect_and_its_chain_to_come_back() {
    let rules = new_connection();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    begin_new(&mut slot, &rules, t0);
    let next = slot.tick(&rules, t0 + TIMEOUT + ms(1));
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Timeout)));
    assert!(next.shutdown);
    let next = report(&mut slot, &rules, t0, Op::Connect, -libc::ECONNRESET);
    assert_eq!(
        (next.ended, next.connected, next.begin),
        (None, None, false)
    );
    report(&mut slot, &rules, t0, Op::Send, -libc::ECANCELED);
    let next = report(&mut slot, &rules, t0, Op::Recv, -libc::ECANCELED);
    assert!(next.close && next.begin && next.ended.is_none());
}

#[test]
fn a_kept_alive_connection_carries_the_next_attempt_without_a_connect() {
    let rules = kept_alive();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let next = deliver(&mut slot, &rules, t0 + ms(1), spare, OK);
    assert_eq!(status(&next), Some(200));
    assert!(!next.close && !next.shutdown && next.begin);
    let generation = slot.generation();
    let next = begin_on_kept(&mut slot, &rules, t0 + ms(2));
    let exchange = Exchange {
        request: 0,
        connect: false,
    };
    assert_eq!(next.send, Some(exchange));
    let next = deliver(&mut slot, &rules, t0 + ms(3), next.recv.unwrap(), OK);
    match next.ended {
        Some(Ended::Answered { began, .. }) => assert_eq!(began, t0 + ms(2)),
        other => panic!("answered, not {other:?}"),
    }
    assert_eq!((slot.generation(), next.connected), (generation, None));
}

#[test]
fn a_server_that_closes_a_kept_alive_connection_makes_the_next_attempt_reconnect() {
    let rules = kept_alive();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let next = deliver(&mut slot, &rules, t0, spare, CLOSING);
    assert_eq!(status(&next), Some(200));
    assert!(next.close && next.begin);
    assert!(begin_new(&mut slot, &rules, t0).send.unwrap().connect);
}

#[test]
fn bytes_that_do_not_parse_fail_the_attempt_as_a_parse_error() {
    let t0 = Instant::now();
    let rules = kept_alive();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let next = deliver(&mut slot, &rules, t0, spare, b"SSH-2.0-OpenSSH\r\n\r\n");
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Parse)));
    assert!(next.close && next.begin);
}

#[test]
fn an_answer_to_a_head_request_is_complete_at_its_head() {
    let rules = Rules {
        head_request: true,
        ..kept_alive()
    };
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let head = &OK[..OK.len() - 5];
    assert_eq!(
        status(&deliver(&mut slot, &rules, t0, spare, head)),
        Some(200)
    );
}

#[test]
fn a_multishot_connection_is_armed_once_connected_and_answers_as_bytes_arrive() {
    let rules = multishot();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let next = begin_new(&mut slot, &rules, t0);
    assert_eq!(next.send.map(|e| e.connect), Some(true));
    let next = report(&mut slot, &rules, t0 + ms(1), Op::Connect, 0);
    assert_eq!(next.connected, Some(ms(1)));
    assert!(next.arm && next.recv.is_none() && !next.begin);
    for round in 1..4 {
        let now = t0 + ms(round);
        let next = arrive(&mut slot, &rules, now, true, Arrival::Bytes(OK));
        assert_eq!((status(&next), next.read), (Some(200), OK.len()));
        assert!(
            next.begin && !next.arm && !next.close,
            "the receive still stands"
        );
        let next = begin_on_kept(&mut slot, &rules, now);
        assert_eq!(next.send.map(|e| e.connect), Some(false));
        assert_eq!((next.recv, next.arm), (None, false));
    }
}

#[test]
fn an_answer_split_across_multishot_arrivals_completes_once() {
    let rules = multishot();
    let t0 = Instant::now();
    for cut in 1..OK.len() {
        let mut slot = Slot::default();
        begin_new(&mut slot, &rules, t0);
        report(&mut slot, &rules, t0, Op::Connect, 0);
        let first = arrive(
            &mut slot,
            &rules,
            t0 + ms(1),
            true,
            Arrival::Bytes(&OK[..cut]),
        );
        assert_eq!((first.ended, first.begin), (None, false), "cut {cut}");
        let rest = arrive(
            &mut slot,
            &rules,
            t0 + ms(2),
            true,
            Arrival::Bytes(&OK[cut..]),
        );
        match rest.ended {
            Some(Ended::Answered { answer, .. }) => assert_eq!(answer.first_byte, t0 + ms(1)),
            other => panic!("cut {cut}: answered, not {other:?}"),
        }
    }
}

/// A multishot slot with an attempt in hand on a connected, armed connection.
fn armed_attempt(slot: &mut Slot, rules: &Rules, t0: Instant) {
    begin_new(slot, rules, t0);
    assert!(report(slot, rules, t0, Op::Connect, 0).arm);
}

#[test]
fn a_multishot_receive_out_of_buffers_is_armed_again_and_the_attempt_goes_on() {
    let rules = multishot();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    armed_attempt(&mut slot, &rules, t0);
    let next = arrive(&mut slot, &rules, t0, false, Arrival::End(-libc::ENOBUFS));
    assert!(next.arm && next.ended.is_none() && !next.close);
    assert!(slot.in_attempt());
    let next = arrive(&mut slot, &rules, t0, true, Arrival::Bytes(OK));
    assert_eq!(status(&next), Some(200));
}

#[test]
fn a_close_in_the_middle_of_a_multishot_answer_fails_it_and_reconnects() {
    let rules = multishot();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    armed_attempt(&mut slot, &rules, t0);
    arrive(&mut slot, &rules, t0, true, Arrival::Bytes(&OK[..20]));
    let next = arrive(&mut slot, &rules, t0, false, Arrival::End(0));
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Closed)));
    assert!(next.close && next.begin && !next.arm);
    assert!(begin_new(&mut slot, &rules, t0).send.unwrap().connect);
}

#[test]
fn a_failure_on_a_multishot_connection_waits_for_the_receive_to_end_before_closing() {
    let rules = multishot();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    armed_attempt(&mut slot, &rules, t0);
    let next = arrive(
        &mut slot,
        &rules,
        t0,
        true,
        Arrival::Bytes(b"garbage\r\n\r\n"),
    );
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Parse)));
    assert!(next.shutdown && !next.close && !next.begin);
    // Bytes still in flight when the shutdown came are given back, not read.
    let next = arrive(&mut slot, &rules, t0, true, Arrival::Bytes(OK));
    assert_eq!((next.ended, next.read, next.begin), (None, 0, false));
    let next = arrive(&mut slot, &rules, t0, false, Arrival::End(0));
    assert!(next.close && next.begin && next.ended.is_none() && !next.arm);
}

#[test]
fn an_idle_connection_the_server_lets_go_is_closed_and_not_counted() {
    let rules = multishot();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    armed_attempt(&mut slot, &rules, t0);
    let next = arrive(&mut slot, &rules, t0, true, Arrival::Bytes(OK));
    assert!(next.begin);
    slot.finish(); // the budget is spent
    let next = arrive(&mut slot, &rules, t0 + ms(9), false, Arrival::End(0));
    assert_eq!(next.ended, None);
    assert!(next.close && !next.begin && !next.arm);
    assert!(slot.is_done() && !slot.is_busy());
}

#[test]
fn a_late_report_about_a_closed_connection_is_ignored() {
    let rules = multishot();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    armed_attempt(&mut slot, &rules, t0);
    let old = slot.generation();
    arrive(&mut slot, &rules, t0, true, Arrival::Bytes(CLOSING));
    let next = arrive(&mut slot, &rules, t0, false, Arrival::End(0));
    assert!(next.close && next.begin);
    assert_ne!(slot.generation(), old);
    begin_new(&mut slot, &rules, t0);
    let stale = slot.on_multishot(&rules, t0, old, false, Arrival::Bytes(OK));
    assert_eq!(stale, Next::default());
    let stale = slot.on_completion(&rules, t0, old, Op::Send, -libc::EPIPE);
    assert_eq!(stale, Next::default());
    assert!(
        slot.in_attempt() && slot.is_busy(),
        "the new connection is untouched"
    );
}

#[test]
fn a_finished_slot_begins_nothing_and_is_done_once_its_operations_are_back() {
    let rules = new_connection();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let next = deliver(&mut slot, &rules, t0, spare, OK);
    assert!(next.begin);
    slot.finish();
    assert!(slot.is_done());
    assert_eq!(slot.tick(&rules, t0 + TIMEOUT * 3), Next::default());
}

#[test]
fn operations_given_back_at_the_end_of_the_run_leave_the_slot_idle() {
    let t0 = Instant::now();
    let rules = new_connection();
    let mut slot = Slot::default();
    begin_new(&mut slot, &rules, t0);
    slot.returned(&rules, Op::Connect, false);
    slot.returned(&rules, Op::Send, false);
    assert!(slot.is_busy(), "the receive is still out");
    slot.returned(&rules, Op::Recv, false);
    assert!(!slot.is_busy());
    let rules = multishot();
    let mut slot = Slot::default();
    armed_attempt(&mut slot, &rules, t0);
    slot.returned(&rules, Op::Recv, true);
    assert!(slot.is_busy(), "the multishot receive still stands");
    slot.returned(&rules, Op::Recv, false);
    assert!(!slot.is_busy());
}

/// Sequential pacing: a connection per request, each attempt ending at the server's close.
fn sequential() -> Rules {
    Rules {
        await_close: true,
        ..new_connection()
    }
}

/// A sequential slot whose answer is in and whose receive for the server's close is out;
/// returns that receive's room.
fn answered_awaiting_close(slot: &mut Slot, rules: &Rules, t0: Instant) -> Spare {
    let spare = connected_attempt(slot, rules, t0);
    let next = deliver(slot, rules, t0 + ms(5), spare, CLOSING);
    assert_eq!(next.ended, None, "not over before the server's close");
    assert_eq!(next.read, CLOSING.len());
    assert!(!next.close && !next.begin && !next.shutdown);
    assert!(slot.in_attempt() && slot.is_busy());
    next.recv.expect("a receive for the server's close")
}

#[test]
fn a_sequential_answer_ends_at_the_servers_close_and_only_then_the_next_connection_opens() {
    let rules = sequential();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    answered_awaiting_close(&mut slot, &rules, t0);
    let next = report(&mut slot, &rules, t0 + ms(9), Op::Recv, 0);
    match next.ended {
        Some(Ended::Answered {
            began,
            answer,
            done,
        }) => {
            assert_eq!((began, answer.status, answer.close), (t0, 200, true));
            assert_eq!(done, t0 + ms(5), "timed at the answer, not at the close");
        }
        other => panic!("answered, not {other:?}"),
    }
    assert!(next.close && next.begin && !next.shutdown);
    assert!(!slot.in_attempt() && !slot.is_busy());
    assert!(
        begin_new(&mut slot, &rules, t0 + ms(9))
            .send
            .unwrap()
            .connect
    );
}

#[test]
fn bytes_after_a_sequential_answer_are_dropped_and_the_close_still_awaited() {
    let rules = sequential();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let trailing = [CLOSING, b"junk"].concat();
    let next = deliver(&mut slot, &rules, t0 + ms(1), spare, &trailing);
    assert_eq!(next.ended, None);
    let spare = next.recv.expect("a receive for the close");
    let next = deliver(&mut slot, &rules, t0 + ms(2), spare, b"more junk");
    assert_eq!((next.ended, next.read), (None, 9));
    let spare = next.recv.expect("the close is still awaited");
    assert!(spare.len as usize >= CLOSING.len(), "the inbox was emptied");
    let next = report(&mut slot, &rules, t0 + ms(3), Op::Recv, 0);
    assert_eq!(status(&next), Some(200));
    assert!(next.close && next.begin);
}

#[test]
fn a_server_that_never_closes_times_out_the_sequential_attempt_once() {
    let rules = sequential();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    answered_awaiting_close(&mut slot, &rules, t0);
    let next = slot.tick(&rules, t0 + TIMEOUT + ms(1));
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Timeout)));
    assert!(next.shutdown && !next.close && !next.begin);
    let next = report(&mut slot, &rules, t0 + TIMEOUT + ms(2), Op::Recv, 0);
    assert_eq!(
        next.ended, None,
        "the shut-down receive is not a second end"
    );
    assert!(next.close && next.begin);
}

#[test]
fn a_reset_instead_of_the_close_fails_the_sequential_attempt() {
    let rules = sequential();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    answered_awaiting_close(&mut slot, &rules, t0);
    let next = report(&mut slot, &rules, t0 + ms(6), Op::Recv, -libc::ECONNRESET);
    assert_eq!(next.ended, Some(Ended::Failed(ErrorKind::Reset)));
    assert!(next.close && next.begin);
    let next = begin_new(&mut slot, &rules, t0 + ms(7));
    let spare = next.recv.unwrap();
    report(&mut slot, &rules, t0 + ms(7), Op::Connect, 0);
    let next = deliver(&mut slot, &rules, t0 + ms(8), spare, OK);
    assert_eq!(
        status(&next),
        Some(200),
        "no answer of the failed attempt lingers"
    );
}

#[test]
fn an_answer_that_keeps_the_connection_open_ends_a_sequential_attempt_at_once() {
    let rules = sequential();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let next = deliver(&mut slot, &rules, t0 + ms(2), spare, OK);
    assert_eq!(
        status(&next),
        Some(200),
        "nothing says the server will close"
    );
    assert!(next.close && next.begin);
}

/// `close = "client"`, sequential or not: a connection per request that the engine closes
/// itself once the answer is complete, never waiting for the server's close.
fn client_closes() -> Rules {
    new_connection()
}

/// Answers that leave the connection open, as a server answers a request that asks for no
/// close: their end is the body's length or the chunked terminator, never a close.
const KEPT_LENGTH: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world";
const KEPT_CHUNKED: &[u8] =
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";

#[test]
fn the_engine_closes_a_connection_at_the_last_byte_of_its_answer_and_not_one_byte_sooner() {
    let rules = client_closes();
    let t0 = Instant::now();
    for answer in [KEPT_LENGTH, KEPT_CHUNKED] {
        let mut slot = Slot::default();
        let mut spare = connected_attempt(&mut slot, &rules, t0);
        let last = answer.len() - 1;
        for (i, byte) in answer.iter().enumerate() {
            let next = deliver(&mut slot, &rules, t0 + ms(2 + i as u64), spare, &[*byte]);
            if i < last {
                let text = String::from_utf8_lossy(&answer[..=i]);
                assert_eq!(next.ended, None, "incomplete after {text:?}");
                assert!(!next.close && !next.shutdown && !next.begin, "{text:?}");
                spare = next.recv.expect("a receive for the rest");
                continue;
            }
            match next.ended {
                Some(Ended::Answered { answer, done, .. }) => {
                    assert_eq!((answer.status, answer.close), (200, false));
                    assert_eq!(done, t0 + ms(2 + last as u64), "done at the last byte");
                }
                other => panic!("answered, not {other:?}"),
            }
            assert!(
                next.close && next.begin && !next.shutdown,
                "closed and the next begun in one step"
            );
            assert!(
                next.recv.is_none(),
                "no receive waits for the server's close"
            );
        }
        assert!(!slot.in_attempt() && !slot.is_busy());
    }
}

#[test]
fn the_engine_closing_first_does_not_wait_even_for_an_answer_that_says_the_server_closes() {
    let rules = client_closes();
    let t0 = Instant::now();
    let mut slot = Slot::default();
    let spare = connected_attempt(&mut slot, &rules, t0);
    let next = deliver(&mut slot, &rules, t0 + ms(3), spare, CLOSING);
    assert_eq!(status(&next), Some(200));
    assert!(next.close && next.begin && next.recv.is_none());
    let began = begin_new(&mut slot, &rules, t0 + ms(3));
    assert!(
        began.send.unwrap().connect,
        "the next connection opens at once"
    );
}
