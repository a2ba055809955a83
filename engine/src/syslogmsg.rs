//! Realistic RFC 5424 syslog messages for the syslog behaviour (spec §7, §7.1).
//!
//! Each message is one of a fixed set of shapes (facilities and severities, hosts, apps,
//! PROCIDs, MSGIDs, zero to two structured-data elements with escaped values, ASCII or
//! UTF-8 text, some with the BOM), chosen by its sequence number, so that a run's mix is
//! the same at every scale and on every generator. The sequence number is RFC 5424's own
//! `[meta sequenceId="N"]` (§7.3.1); loss stays `sent − received` and a receiver may read
//! it. Lengths vary around the plan's `message_bytes` (the shapes' length factors average
//! 1.0): a message is padded with its own text to its shape's length, never cut below its
//! header.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// (PRI, HOSTNAME, APP-NAME, PROCID, MSGID, extra SD or "", BOM, text, length factor).
type Shape = (
    u8,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static str,
    f64,
);

const SHAPES: [Shape; 16] = [
    (
        134,
        "web-01.example.net",
        "nginx",
        "2211",
        "ACCESS",
        "",
        false,
        "198.51.100.7 GET /index.html HTTP/1.1 200 1532 0.004 ",
        0.5,
    ),
    (
        14,
        "app-03",
        "checkout",
        "8812",
        "-",
        r#"[origin ip="192.0.2.10" software="serverlab-load" swVersion="1"]"#,
        false,
        "order placed, basket=7 items, total=81.20 EUR ",
        1.0,
    ),
    (
        11,
        "db-02.example.net",
        "postgres",
        "733",
        "ERR",
        "",
        true,
        "connexion refusée pour l'utilisateur « app » : délai dépassé ",
        1.2,
    ),
    (
        165,
        "mymachine.example.com",
        "evntslog",
        "-",
        "ID47",
        r#"[exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"][examplePriority@32473 class="high"]"#,
        true,
        "An application event log entry... ",
        1.5,
    ),
    (
        30,
        "cache-7",
        "redis-server",
        "1",
        "-",
        "",
        false,
        "Background saving started by pid 4242 ",
        0.6,
    ),
    (
        86,
        "bastion",
        "sshd",
        "31337",
        "AUTH",
        r#"[auth@32473 user="deploy" method="publickey"]"#,
        false,
        "Accepted publickey for deploy from 203.0.113.5 port 52144 ssh2 ",
        0.9,
    ),
    (
        14,
        "edge-tokyo-1",
        "gateway",
        "501",
        "REQ",
        "",
        true,
        "ユーザー 認証 成功、セッションを開始しました ",
        1.1,
    ),
    (
        131,
        "worker-12",
        "queue",
        "77",
        "RETRY",
        r#"[job@32473 id="a1b2c3" path="/tmp/\"odd\" \]name"]"#,
        false,
        "job failed, retrying in 30 s (attempt 2 of 5) ",
        0.8,
    ),
    (
        13,
        "k8s-node-4",
        "kubelet",
        "1024",
        "-",
        "",
        false,
        "Pod sandbox changed, it will be killed and re-created. ",
        1.3,
    ),
    (
        22,
        "mail-1.example.org",
        "postfix/smtpd",
        "9090",
        "-",
        "",
        true,
        "connect from unknown[198.51.100.23] — greylisted ",
        0.7,
    ),
    (
        38,
        "fw-1",
        "kernel",
        "-",
        "DROP",
        r#"[net@32473 src="203.0.113.9" dst="192.0.2.1" proto="TCP"]"#,
        false,
        "IN=eth0 OUT= SRC=203.0.113.9 DST=192.0.2.1 LEN=60 TTL=52 ",
        1.4,
    ),
    (
        14,
        "ci-runner",
        "builder",
        "300",
        "STEP",
        "",
        false,
        "step 4/9 : RUN cargo build --release --locked ",
        0.75,
    ),
    (
        12,
        "sensor-hub",
        "telemetry",
        "66",
        "TEMP",
        r#"[reading@32473 unit="°C" value="21.5"]"#,
        true,
        "Датчик температуры: значение в норме ",
        1.25,
    ),
    (
        158,
        "lb-2",
        "haproxy",
        "4000",
        "-",
        "",
        false,
        "backend app has no server available! ",
        0.85,
    ),
    (
        14,
        "app-03",
        "checkout",
        "8812",
        "PAY",
        r#"[origin ip="192.0.2.10"]"#,
        false,
        "payment authorised, ref=PAY-000123, 3-D Secure passed ",
        1.15,
    ),
    (
        46,
        "log-relay",
        "rsyslogd",
        "-",
        "-",
        "",
        false,
        "action 'fwd' resumed (module 'builtin:omfwd') ",
        1.0,
    ),
];

/// No message is longer than this, so that one fits a UDP datagram whatever its factor.
const LONGEST: usize = 65_000;

/// Builds the messages of one run; cheap to call per message, with a clock read per batch.
pub(crate) struct Composer {
    message_bytes: usize,
    /// Each shape's text repeated to at least the longest message, to pad with.
    padding: Vec<Vec<u8>>,
}

impl Composer {
    pub fn new(message_bytes: usize) -> Composer {
        let longest = LONGEST.min(message_bytes * 2) + 64;
        let padding = SHAPES
            .iter()
            .map(|shape| shape.7.as_bytes().repeat(longest / shape.7.len() + 1))
            .collect();
        Composer {
            message_bytes,
            padding,
        }
    }

    /// RFC 3339 UTC with microseconds, as RFC 5424's TIMESTAMP; read once per batch.
    pub fn timestamp() -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let secs = now.as_secs();
        let (year, month, day) = civil_from_days((secs / 86_400) as i64);
        let of_day = secs % 86_400;
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
            of_day / 3600,
            of_day % 3600 / 60,
            of_day % 60,
            now.subsec_micros()
        )
    }

    /// Appends message `seq` (unframed) to `out`.
    pub fn compose(&self, out: &mut Vec<u8>, seq: u64, timestamp: &str) {
        let index = (seq % SHAPES.len() as u64) as usize;
        let (pri, host, app, procid, msgid, sd, bom, _, factor) = SHAPES[index];
        let start = out.len();
        let _ = write!(
            out,
            "<{pri}>1 {timestamp} {host} {app} {procid} {msgid} [meta sequenceId=\"{seq}\"]{sd} "
        );
        if bom {
            out.extend_from_slice(b"\xef\xbb\xbf");
        }
        let wanted = ((self.message_bytes as f64 * factor) as usize).min(LONGEST);
        let text = &self.padding[index];
        // At least one pass of the text, then up to the shape's length, cut where a UTF-8
        // character begins and made exact with ASCII.
        let room = wanted
            .saturating_sub(out.len() - start)
            .max(SHAPES[index].7.len())
            .min(text.len());
        let mut cut = room;
        while cut > 0 && cut < text.len() && (text[cut] & 0xC0) == 0x80 {
            cut -= 1;
        }
        out.extend_from_slice(&text[..cut]);
        out.resize(out.len() + room - cut, b'.');
    }
}

/// (year, month, day) of a day number since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_come_out_as_the_calendar_has_them() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_782), (2026, 11, 25));
        assert_eq!(Composer::timestamp().len(), 27);
    }

    #[test]
    fn lengths_vary_around_message_bytes_and_text_stays_utf8() {
        let composer = Composer::new(300);
        let stamp = Composer::timestamp();
        let mut total = 0;
        let mut lengths = std::collections::BTreeSet::new();
        for seq in 1..=1600u64 {
            let mut out = Vec::new();
            composer.compose(&mut out, seq, &stamp);
            let text = String::from_utf8(out.clone()).expect("UTF-8 throughout");
            assert!(text.contains(&format!("[meta sequenceId=\"{seq}\"]")));
            assert!(!text.contains('\n'));
            lengths.insert(out.len());
            total += out.len();
        }
        let mean = total as f64 / 1600.0;
        assert!((mean - 300.0).abs() < 30.0, "mean length {mean}");
        assert!(lengths.len() >= 12, "{lengths:?}");
    }

    #[test]
    fn a_small_message_bytes_keeps_whole_headers() {
        let composer = Composer::new(32);
        let mut out = Vec::new();
        composer.compose(&mut out, 3, &Composer::timestamp());
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("<165>1 "));
        assert!(text.contains("[examplePriority@32473 class=\"high\"] \u{feff}An application"));
    }
}
