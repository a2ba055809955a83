"""A small HTTP/2 server with prior knowledge (h2c) on the `h2` library, for the tests of
verify's HTTP/2 checks (spec §13, §14): `--mode good` ends a connection that breaks RFC
9113 or RFC 7541 with GOAWAY and the code the RFC names, and a close, and resets a
malformed request's stream with PROTOCOL_ERROR; `--mode silent` ignores what it cannot
parse, leaving the connection and the malformed request's stream open, and never resets a
stream; `--mode lax` serves a malformed request; `--mode hold` answers it 400 and leaves
its stream open; `--mode strict` ends the connection
(GOAWAY PROTOCOL_ERROR) on any CONTINUATION frame, PING ACK, SETTINGS frame naming a setting
twice or frame of an unknown type, which RFC 9113 allows; `--mode late` serves what came
with such a frame, then ends the connection (GOAWAY INTERNAL_ERROR), as Node's http2 does
on a PING ACK once its destroy waits a turn; so that the checks are seen to fail.

Every request gets `200` and a short body, sent as flow control allows: a client that
opens no window holds its streams open. The cleartext `--port` answers any HTTP/1.1
request 404 and closes: serverlab's readiness probe, and verify's check that a server
still answers after a bad-input case.
"""

import argparse
import asyncio
import contextlib

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
import hpack.exceptions
import hyperframe.exceptions

BODY = b"hello over h2c\n"
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
MAX_STREAMS = 100
# RFC 9113 §8.3.1: a request without one of these is malformed (§8.1.1).
PSEUDO_HEADERS = {b":method", b":scheme", b":path"}
# RFC 9113 §8.2.2: connection-specific fields make a request malformed.
CONNECTION_FIELDS = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding"}
PREFACE_SIZE, RST_STREAM, SETTINGS, PING, CONTINUATION, ACK = 24, 0x3, 0x4, 0x6, 0x9, 0x1


def _malformed(headers: list[tuple[bytes, bytes]]) -> bool:
    """RFC 9113 §8.1.1: a request missing a pseudo-header field or naming one twice
    (§8.3), with one after a regular field (§8.3), an uppercase name (§8.2.1) or a
    connection-specific field (§8.2.2)."""
    names = [name for name, _value in headers]
    pseudo = [name for name in names if name.startswith(b":")]
    return (
        not PSEUDO_HEADERS.issubset(pseudo)
        or len(set(pseudo)) < len(pseudo)
        or names[: len(pseudo)] != pseudo
        or any(name != name.lower() or name in CONNECTION_FIELDS for name in names)
    )


def _error_code(error: h2.exceptions.ProtocolError) -> int:
    """The code RFC 9113 names where the h2 library's own is vaguer: COMPRESSION_ERROR for
    a field block that does not decode (§4.3), FRAME_SIZE_ERROR for a SETTINGS ACK with a
    payload (§6.5)."""
    cause = error.__cause__ or error.__context__
    if isinstance(cause, hpack.exceptions.HPACKError | IndexError):
        return h2.errors.ErrorCodes.COMPRESSION_ERROR
    if isinstance(cause, hyperframe.exceptions.InvalidDataError) and "ack" in str(cause):
        return h2.errors.ErrorCodes.FRAME_SIZE_ERROR
    return error.error_code


def _without_resets(data: bytes) -> bytes:
    """The frames to send but RST_STREAM (mode silent resets no stream)."""
    kept, at = [], 0
    while at < len(data):
        end = at + 9 + int.from_bytes(data[at : at + 3], "big")
        if data[at + 3] != RST_STREAM:
            kept.append(data[at:end])
        at = end
    return b"".join(kept)


def _duplicates(payload: bytes) -> bool:
    ids = [payload[at : at + 2] for at in range(0, len(payload), 6)]
    return len(set(ids)) < len(ids)


class Connection:
    def __init__(self, reader, writer, mode: str):
        self.reader, self.writer, self.mode = reader, writer, mode
        # The header checks are this server's own (on_event), so that a fault can skip them.
        config = h2.config.H2Configuration(client_side=False, validate_inbound_headers=False)
        self.h2 = h2.connection.H2Connection(config)
        self.pending: dict[int, bytes] = {}
        self.inbound, self.past_preface, self.late = b"", False, False

    def refused(self, data: bytes) -> bool:
        """Mode strict: True once a CONTINUATION frame, a PING ACK, a SETTINGS frame naming
        a setting twice or a frame of an unknown type has come (read from the raw bytes: the
        h2 library hides CONTINUATION and unknown frames, and merges settings)."""
        self.inbound += data
        if not self.past_preface and len(self.inbound) >= PREFACE_SIZE:
            self.inbound, self.past_preface = self.inbound[PREFACE_SIZE:], True
        while self.past_preface and len(self.inbound) >= 9:
            kind, flags = self.inbound[3], self.inbound[4]
            if kind >= CONTINUATION or (kind == PING and flags & ACK):
                return True
            end = 9 + int.from_bytes(self.inbound[:3], "big")
            if len(self.inbound) < end:
                break
            if kind == SETTINGS and not flags & ACK and _duplicates(self.inbound[9:end]):
                return True
            self.inbound = self.inbound[end:]
        return False

    async def serve(self) -> None:
        self.h2.initiate_connection()
        self.h2.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_STREAMS})
        self.flush()
        while data := await self.reader.read(65536):
            # Mode late: the connection ends after the first request served once such a
            # frame has come, whether or not it came in the same read.
            self.late = self.late or (self.mode == "late" and self.refused(data))
            try:
                if self.mode == "strict" and self.refused(data):
                    raise h2.exceptions.ProtocolError("refused by mode strict")
                events = self.h2.receive_data(data)
            except h2.exceptions.ProtocolError as error:
                if self.mode == "silent":
                    await self.reader.read()  # hold the connection until the client goes
                    return
                self.h2.close_connection(error_code=_error_code(error))
                self.flush()
                return
            for event in events:
                self.on_event(event)
            self.send_pending()
            ending = self.late and any(isinstance(e, h2.events.RequestReceived) for e in events)
            if ending:
                self.h2.close_connection(error_code=h2.errors.ErrorCodes.INTERNAL_ERROR)
            self.flush()
            if ending:
                return

    def on_event(self, event) -> None:
        if isinstance(event, h2.events.StreamReset):
            self.pending.pop(event.stream_id, None)
        if not isinstance(event, h2.events.RequestReceived):
            return
        if self.h2.streams.get(event.stream_id) is None or self.h2.streams[event.stream_id].closed:
            return  # reset by the client in the same read (a Rapid Reset): nothing to answer
        if _malformed(event.headers):
            if self.mode == "good":
                self.h2.reset_stream(event.stream_id, h2.errors.ErrorCodes.PROTOCOL_ERROR)
            if self.mode == "hold":
                self.h2.send_headers(event.stream_id, [(":status", "400")])
            if self.mode != "lax":
                return
        headers = [(":status", "200"), ("content-type", "text/plain")]
        headers += [
            ("content-length", str(len(BODY))),
            ("date", "Thu, 01 Jan 2026 00:00:00 GMT"),
        ]
        self.h2.send_headers(event.stream_id, headers)
        self.pending[event.stream_id] = BODY

    def send_pending(self) -> None:
        for stream_id, body in list(self.pending.items()):
            window = self.h2.local_flow_control_window(stream_id)
            if window >= len(body):
                self.h2.send_data(stream_id, body, end_stream=True)
                del self.pending[stream_id]

    def flush(self) -> None:
        data = self.h2.data_to_send()
        self.writer.write(_without_resets(data) if self.mode == "silent" else data)


async def main(port: int, h2c_port: int, host: str, mode: str) -> None:
    async def on_h2c(reader, writer):
        with contextlib.suppress(ConnectionError):
            await Connection(reader, writer, mode).serve()
        writer.close()

    async def on_plain(reader, writer):
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(NOT_FOUND)
            await writer.drain()
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
    parser.add_argument(
        "--mode", choices=("good", "silent", "lax", "hold", "strict", "late"), default="good"
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(args.port, args.h2c_port, args.host, args.mode))
