"""A syslog flood measured where it lands: the receiver's own count, polled from before the
flood until it settles, gives the rate and the loss (seed 002 timed its floods at the
receiver, because socket buffers let a sender finish long before the last message arrives).
"""

from __future__ import annotations

import itertools
import subprocess
import threading
import time

from serverlab.base import httpclient
from serverlab.contestant.server import ContestantServer
from serverlab.results.records import RecordedTest, ServerStats
from serverlab.run.host import shapedlink

# A receiver has settled when its count has not risen for SETTLE_QUIET_S.
SETTLE_POLL_S = 0.02
SETTLE_QUIET_S = 2.0
SETTLE_LIMIT_S = 600.0
# A flood shorter than this at the receiver is mostly start-up (issue 23): flagged.
MIN_FLOOD_S = 10.0


def _syslog_received(server: ContestantServer) -> int | None:
    """Messages the server has counted so far: /stats, or the manifest's syslog_count."""
    if "control" in server.manifest.implements:
        try:
            return int(server.stats()["syslog"]["received"])
        except (httpclient.HttpError, OSError, ValueError, KeyError, TypeError):
            return None
    return syslog_count(server)


class ReceiverWatch:
    """Polls a syslog receiver's count from before the flood until it stops rising. The
    receiving time is then bounded by polls at both ends: the last one that saw nothing
    new yet and the first that saw the final count. Neither the sender's start-up nor the
    megabytes the socket buffers hold when the sender finishes can hide in it."""

    def __init__(self, server: ContestantServer):
        self.server = server
        self.samples: list[tuple[float, float, int]] = []  # (asked, answered, count)
        self.baseline = _syslog_received(server)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        if self.baseline is not None:
            self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            asked = time.monotonic()
            count = _syslog_received(self.server)
            if count is not None:
                self.samples.append((asked, time.monotonic(), count))
            self._stop.wait(SETTLE_POLL_S)

    def settle(self) -> dict | None:
        """Waits until the count has not risen for SETTLE_QUIET_S; None if it cannot count."""
        if self.baseline is None:
            return None
        deadline = time.monotonic() + SETTLE_LIMIT_S
        while time.monotonic() < deadline and not self._quiet():
            time.sleep(SETTLE_POLL_S)
        self.stop()
        samples = list(self.samples)
        final = max(count for _, _, count in samples)
        # A count may take a while to read (rsyslog's count.sh waits for its file to
        # settle), so the bounds are the start of the last read that saw nothing new and
        # the end of the first that saw everything: never shorter than the truth.
        finished = next(done for _, done, count in samples if count == final)
        began = max(
            (asked for asked, _, count in samples if count == self.baseline),
            default=samples[0][0],
        )
        span = max(finished - began, SETTLE_POLL_S)
        return {
            "received": final - self.baseline,
            "received_total": final,
            "receiving_s": round(span, 3),
            "messages_per_s": round((final - self.baseline) / span, 1),
            "poll_s": SETTLE_POLL_S,
            "settled": time.monotonic() < deadline,
        }

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _quiet(self) -> bool:
        samples = list(self.samples)
        if not samples:
            return False
        last_count = samples[-1][2]
        changed = next(done for _, done, count in samples if count == last_count)
        return samples[-1][1] - changed >= SETTLE_QUIET_S


def put_receiver_figures(test: RecordedTest, receiver: dict | None, server) -> None:
    """The flood's figures are the receiver's: rate and loss as the server counted them;
    the engine's own rate stays beside them as `sender_rps`."""
    if receiver is None:
        test.validity["receiver_count_unavailable"] = "figures are the sender's"
        return
    if "control" not in server.manifest.implements:
        # No /stats to hold the count at the end: keep the receiver's own.
        stats = {"syslog_count": receiver["received_total"]}
        test.server_stats.append(ServerStats(t=time.time() - test.started_at, stats=stats))
    if test.summary is None:
        test.validity["syslog_receiver"] = receiver
        return
    # Messages the engine sent whole (a failed send is an error, not a message sent).
    sent = test.summary.get("answered", test.summary.get("requests"))
    figures = {
        **receiver,
        **_parse_counts(server),
        "sent": sent,
        "lost": None if sent is None else sent - receiver["received"],
    }
    per_sender(test, figures)
    if receiver["receiving_s"] < MIN_FLOOD_S:
        test.validity["short_flood"] = (
            f"{receiver['receiving_s']} s at the receiver, under {MIN_FLOOD_S:g} s"
        )
    if figures.get("malformed"):
        test.validity["syslog_malformed"] = f"{figures['malformed']} messages did not parse"
    test.summary = {
        **test.summary,
        "sender_rps": test.summary.get("rps"),
        "rps": figures["messages_per_s"],
        "syslog": figures,
    }


def per_sender(test: RecordedTest, figures: dict) -> None:
    """A flood from several generators: each sender's numbers and count beside the total.
    Loss is exact only if the senders' ranges are disjoint and their counts add up to what
    was sent; either failing is flagged, never hidden in the total."""
    generators = test.run_info.get("generators") or []
    if not generators:
        return
    senders = [
        {
            "address": g.get("address"),
            "seq_first": g.get("seq_first"),
            "sent": (g.get("summary") or {}).get(
                "answered", (g.get("summary") or {}).get("requests")
            ),
        }
        for g in generators
    ]
    figures["senders"] = senders
    counts = [s["sent"] for s in senders]
    if None in counts or sum(counts) != figures["sent"]:
        test.validity["syslog_senders_disagree"] = (
            f"senders' counts {counts} against {figures['sent']} sent in all"
        )
    ranges = sorted(
        (s["seq_first"], s["seq_first"] + (s["sent"] or 0))
        for s in senders
        if s["seq_first"] is not None
    )
    if len(ranges) != len(senders) or any(a[1] > b[0] for a, b in itertools.pairwise(ranges)):
        test.validity["syslog_numbering_overlaps"] = f"sender ranges {ranges}"


def _parse_counts(server: ContestantServer) -> dict:
    """A syslog-parse server's mode and parse counts (spec §7.1) at the flood's end; its
    server is fresh for the test, so they are the flood's."""
    if "syslog-parse" not in server.manifest.implements:
        return {}
    try:
        syslog = server.stats()["syslog"]
    except (httpclient.HttpError, OSError, ValueError, KeyError, TypeError):
        return {}
    return {key: syslog.get(key) for key in ("mode", "parsed", "malformed")}


def syslog_count(server: ContestantServer) -> int | None:
    """A syslog-only server's count, by its manifest's `syslog_count` command."""
    if not server.manifest.syslog_count:
        return None
    command = server.expand(server.manifest.syslog_count)
    if isinstance(server, shapedlink.NamespacedServer):
        command = server.namespace.shell(command)
    out = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=server.manifest.folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    try:
        return int(out.stdout.strip().split()[0])
    except (IndexError, ValueError):
        return None
