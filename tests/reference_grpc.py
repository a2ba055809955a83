"""A small gRPC face of spec §16 on the `h2` library, for the tests of verify's gRPC checks:
the service serverlab.v1.Lab on `--h2c-port`, and on `--port` just enough HTTP/1.1 control
for them (`POST /event/set`, `POST /event/clear`, `GET /stats` with its `grpc` group) and
`GET /perf` for the lab's smoke check.

`--fault none` keeps every rule; each other fault breaks one, so that a check is seen to
fail: `status_in_headers` (grpc-status sent in the response headers, before the messages,
and no trailers), `no_limit` (Echo serves messages past 4 MiB), `unknown_ok` (unknown
methods answered OK), `perf_short` (Perf's body cut to 83 bytes), `chat_late` (Chat echoes
only after the client ends its side, last first), `no_deadline` (grpc-timeout ignored),
`keeps_gone` (a cancelled Subscribe stays counted open), `seq_gap` (seq rises by two),
`no_validation` (any event list subscribed), `unavailable` (Perf answered UNAVAILABLE, as a
server shedding load: for the engine's count of errors by gRPC status). For the engine's
`grpc-stream`: `refuse_streams` (Subscribe answered trailers-only, UNAVAILABLE),
`cut_streams` (a stream's connection closed inside its third delivery); for `grpc-chat`:
`chat_garbled` (each echo's last byte changed). For a capacity search of `grpc-unary`:
`slow_above_rate` (Perf answered 300 ms late past a token bucket of 150 calls a second: the
planted knee of reference_server.py's GET /perf, on gRPC).
"""

import argparse
import asyncio
import contextlib
import json
import struct
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
from reference_server import KNEE_DELAY_S, KneeBucket

PERF_BODY = b"serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.\n"
LIMIT = 4 * 1024 * 1024
NAME_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
OK, INVALID_ARGUMENT, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNIMPLEMENTED = 0, 3, 4, 8, 12
UNAVAILABLE = 14


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, value) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value) if value else b""
    value = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(value)) + value if value else b""


def strings(message: bytes) -> list[bytes]:
    """Every length-delimited field's bytes (the service's requests have one such field)."""
    found, at = [], 0
    while at < len(message):
        key, at = read_varint(message, at)
        if key & 7 == 0:
            _, at = read_varint(message, at)
            continue
        size, at = read_varint(message, at)
        found.append(message[at : at + size])
        at += size
    return found


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value, at, shift = value | (byte & 0x7F) << shift, at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def prefixed(message: bytes) -> bytes:
    return b"\x00" + struct.pack("!I", len(message)) + message


def timeout_s(text: str | None) -> float | None:
    units = {"H": 3600, "M": 60, "S": 1, "m": 1e-3, "u": 1e-6, "n": 1e-9}
    return int(text[:-1]) * units[text[-1]] if text else None


class Hub:
    """The events and the open Subscribe streams of the whole server."""

    def __init__(self, fault: str):
        self.fault = fault
        self.seqs: dict[str, int] = {}
        self.emitters: dict[str, asyncio.Task] = {}
        self.streams: list = []  # (call, names) of open Subscribe streams
        self.calls = self.open = self.deliveries = 0
        self.perf_rate = KneeBucket()

    def set(self, name: str, interval_ms: int) -> None:
        self.clear(name)
        self.emitters[name] = asyncio.create_task(self._emit_every(name, interval_ms / 1000))

    def clear(self, name: str) -> None:
        if task := self.emitters.pop(name, None):
            task.cancel()

    async def _emit_every(self, name: str, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            self.seqs[name] = self.seqs.get(name, 0) + (2 if self.fault == "seq_gap" else 1)
            created = int(time.time() * 1000)
            held = [call for call, names in self.streams if name in names]
            for place, call in enumerate(held, start=1):
                sent = int(time.time() * 1000)
                delivery = field(1, name) + field(2, self.seqs[name]) + field(3, created)
                delivery += field(4, sent) + field(5, len(held)) + field(6, place)
                call.send_message(delivery)
                self.deliveries += 1

    def stats(self) -> dict:
        grpc = {"calls": self.calls, "open": self.open, "deliveries": self.deliveries}
        return {"spec_version": "3.4", "server": "reference-grpc", "grpc": grpc}


class Call:
    """One gRPC call on its stream."""

    def __init__(self, connection: "Connection", stream_id: int, path: str, headers: dict):
        self.connection, self.stream_id, self.path = connection, stream_id, path
        self.deadline = timeout_s(headers.get("grpc-timeout"))
        self.buffer = b""
        self.started = self.done = False
        self.chat: list[bytes] = []
        self.sent = 0
        self.late = False  # a Perf answered later (slow_above_rate): its end does not finish it
        self.watch: asyncio.Task | None = None

    def send_headers(self, extra=()) -> None:
        if not self.started:
            headers = [(":status", "200"), ("content-type", "application/grpc"), *extra]
            self.connection.h2.send_headers(self.stream_id, headers)
            self.started = True

    def send_message(self, message: bytes) -> None:
        if self.done:
            return
        self.sent += 1
        if self.connection.hub.fault == "cut_streams" and self.sent == 3:
            self.connection.cut(self.stream_id, prefixed(message)[:4])
            return
        if self.connection.hub.fault == "status_in_headers" and not self.started:
            self.send_headers([("grpc-status", "0")])
        self.send_headers()
        self.connection.send(self.stream_id, prefixed(message))

    def finish(self, code: int, text: str = "") -> None:
        if self.done:
            return
        if self.connection.hub.fault == "status_in_headers" and self.started:
            self.connection.send(self.stream_id, b"", True)
        else:
            self.send_headers()
            trailers = [("grpc-status", str(code))] + ([("grpc-message", text)] if code else [])
            self.connection.send_trailers(self.stream_id, trailers)
        self.ended()

    def refuse(self, code: int, text: str) -> None:
        """A trailers-only answer: one HEADERS frame with the status, ending the stream."""
        headers = [(":status", "200"), ("content-type", "application/grpc")]
        headers += [("grpc-status", str(code)), ("grpc-message", text)]
        self.connection.h2.send_headers(self.stream_id, headers, end_stream=True)
        self.started = True
        self.ended()

    def ended(self) -> None:
        self.done = True
        hub = self.connection.hub
        if self.watch:
            self.watch.cancel()
        if any(call is self for call, _ in hub.streams):
            hub.streams = [(call, names) for call, names in hub.streams if call is not self]
            if hub.fault != "keeps_gone":
                hub.open -= 1

    def take(self, data: bytes, end: bool) -> None:
        self.buffer += data
        over = len(self.buffer) >= 5 and struct.unpack("!I", self.buffer[1:5])[0] > LIMIT
        if over and self.connection.hub.fault != "no_limit":
            self.finish(RESOURCE_EXHAUSTED, "message larger than max")
            self.connection.h2.reset_stream(self.stream_id, h2.errors.ErrorCodes.NO_ERROR)
            return
        while len(self.buffer) >= 5:
            size = struct.unpack("!I", self.buffer[1:5])[0]
            if len(self.buffer) < 5 + size:
                break
            message, self.buffer = self.buffer[5 : 5 + size], self.buffer[5 + size :]
            self.on_message(message)
        if end:
            self.on_end()

    def on_message(self, message: bytes) -> None:
        method = self.path.rsplit("/", 1)[-1]
        if method == "Perf" and self.connection.hub.fault == "unavailable":
            self.finish(UNAVAILABLE, "shedding load")
        elif method == "Perf" and self.over_knee():
            self.late = True
            asyncio.get_running_loop().call_later(KNEE_DELAY_S, self.answer_perf)
        elif method == "Perf":
            self.answer_perf()
        elif method == "Echo":
            self.send_message(message)
        elif method == "Chat":
            if self.connection.hub.fault == "chat_garbled" and message:
                message = message[:-1] + bytes([message[-1] ^ 1])
            if self.connection.hub.fault == "chat_late":
                self.chat.insert(0, message)
            else:
                self.send_message(message)
        elif method == "Subscribe":
            self.subscribe([name.decode() for name in strings(message)])

    def over_knee(self) -> bool:
        hub = self.connection.hub
        return hub.fault == "slow_above_rate" and hub.perf_rate.over()

    def answer_perf(self) -> None:
        body = PERF_BODY[:83] if self.connection.hub.fault == "perf_short" else PERF_BODY
        self.send_message(field(1, body))
        if self.late:
            self.finish(OK)

    def on_end(self) -> None:
        method = self.path.rsplit("/", 1)[-1]
        if method == "Chat":
            for message in self.chat:
                self.send_message(message)
        if method != "Subscribe" and not self.late:
            self.finish(OK)

    def subscribe(self, names: list[str]) -> None:
        hub = self.connection.hub
        if hub.fault == "refuse_streams":
            self.refuse(UNAVAILABLE, "not now")
            return
        good = 1 <= len(names) <= 16 and len(set(names)) == len(names)
        good = good and all(0 < len(name) <= 64 and set(name) <= NAME_CHARS for name in names)
        if not good and hub.fault != "no_validation":
            self.finish(INVALID_ARGUMENT, "bad event list")
            return
        hub.streams.append((self, set(names)))
        hub.open += 1
        if self.deadline is not None and hub.fault != "no_deadline":
            self.watch = asyncio.create_task(self._expire())

    async def _expire(self) -> None:
        await asyncio.sleep(self.deadline)
        self.watch = None
        self.finish(DEADLINE_EXCEEDED, "deadline exceeded")


class Connection:
    def __init__(self, reader, writer, hub: Hub):
        self.reader, self.writer, self.hub = reader, writer, hub
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self.calls: dict[int, Call] = {}
        self.pending: dict[int, list] = {}

    async def serve(self) -> None:
        self.h2.initiate_connection()
        self.flush()
        with contextlib.suppress(h2.exceptions.ProtocolError):
            while data := await self.reader.read(65536):
                for event in self.h2.receive_data(data):
                    self.on_event(event)
                self.drain()
        for call in list(self.calls.values()):
            call.ended()

    def on_event(self, event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            headers = dict(event.headers)
            self.hub.calls += 1
            call = Call(self, event.stream_id, headers[":path"], headers)
            self.calls[event.stream_id] = call
            if not call.path.startswith("/serverlab.v1.Lab/") and self.hub.fault != "unknown_ok":
                call.finish(UNIMPLEMENTED, "unknown service")
            elif call.path.rsplit("/", 1)[-1] not in ("Perf", "Echo", "Subscribe", "Chat"):
                call.finish(OK if self.hub.fault == "unknown_ok" else UNIMPLEMENTED, "unknown")
            if event.stream_ended:
                call.take(b"", True)
        elif isinstance(event, h2.events.DataReceived):
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            call = self.calls.get(event.stream_id)
            if call and not call.done:
                call.take(event.data, event.stream_ended is not None)
        elif isinstance(event, h2.events.StreamEnded):
            call = self.calls.get(event.stream_id)
            if call and not call.done and call.path.endswith("Chat"):
                call.on_end()
        elif isinstance(event, h2.events.StreamReset) and event.stream_id in self.calls:
            self.calls.pop(event.stream_id).ended()

    def cut(self, stream_id: int, data: bytes) -> None:
        """Sends `data` (a message's first bytes) on the stream, then drops the connection."""
        self.drain()
        self.h2.send_data(stream_id, data)
        self.flush()
        self.writer.close()

    def send(self, stream_id: int, data: bytes, end: bool = False) -> None:
        self.queue(stream_id, ("data", data, end))

    def send_trailers(self, stream_id: int, trailers) -> None:
        self.queue(stream_id, ("trailers", trailers, True))

    def queue(self, stream_id: int, item) -> None:
        """What a stream sends waits its turn and the flow-control windows."""
        self.pending.setdefault(stream_id, []).append(item)
        self.drain()

    def drain(self) -> None:
        for stream_id, items in list(self.pending.items()):
            try:
                self.drain_stream(stream_id, items)
            except h2.exceptions.ProtocolError:  # reset or closed meanwhile
                items.clear()
            if not items:
                del self.pending[stream_id]
        self.flush()

    def drain_stream(self, stream_id: int, items: list) -> None:
        while items:
            kind, payload, end = items[0]
            if kind == "trailers":
                self.h2.send_headers(stream_id, payload, end_stream=True)
            else:
                window = min(self.h2.local_flow_control_window(stream_id), 16384)
                if window <= 0 and payload:
                    return
                piece, rest = payload[:window], payload[window:]
                self.h2.send_data(stream_id, piece, end_stream=end and not rest)
                if rest:
                    items[0] = (kind, rest, end)
                    continue
            items.pop(0)

    def flush(self) -> None:
        self.writer.write(self.h2.data_to_send())


async def control(reader, writer, hub: Hub) -> None:
    """HTTP/1.1 control, one request per connection."""
    head = await reader.readuntil(b"\r\n\r\n")
    line, *fields = head.decode().split("\r\n")
    method, target, _ = line.split(" ")
    lengths = [int(f.split(":")[1]) for f in fields if f.lower().startswith("content-length")]
    length = lengths[0] if lengths else 0
    body = json.loads(await reader.readexactly(length) or b"{}")
    if target == "/event/set":
        hub.set(body["name"], body["interval_ms"])
    elif target == "/event/clear":
        hub.clear(body["name"])
    answer = json.dumps(hub.stats() if target == "/stats" else {"ok": True}).encode()
    kind = b"application/json"
    if target == "/perf":  # the lab's smoke check of every test (the manifest claims perf)
        answer, kind = PERF_BODY, b"text/plain"
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: "
        + kind
        + b"\r\nConnection: close\r\n"
        + f"Content-Length: {len(answer)}\r\n\r\n".encode()
        + answer
    )
    await writer.drain()


async def main(port: int, h2c_port: int, host: str, fault: str) -> None:
    hub = Hub(fault)

    async def on_h2c(reader, writer):
        with contextlib.suppress(ConnectionError):
            await Connection(reader, writer, hub).serve()
        writer.close()

    async def on_plain(reader, writer):
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
            await control(reader, writer, hub)
        writer.close()

    hosts = sorted({"127.0.0.1", host})
    plain = await asyncio.start_server(on_plain, hosts, port)
    h2c = await asyncio.start_server(on_h2c, hosts, h2c_port)
    async with plain, h2c:
        await asyncio.gather(plain.serve_forever(), h2c.serve_forever())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--h2c-port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--fault", default="none")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(args.port, args.h2c_port, args.host, args.fault))
