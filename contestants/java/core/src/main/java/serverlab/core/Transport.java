package serverlab.core;

/**
 * How a subscriber takes its deliveries (spec §6, §10, §11, §16). One emit cycle snapshots the
 * subscribers of every transport together; only the framing and the counters differ.
 */
public enum Transport {
    /** {@code POST /push} long poll: answered by its first delivery. */
    LONGPOLL,
    /** {@code POST /push} comet stream: one NDJSON line per delivery. */
    COMET,
    /** {@code GET /sse}: one Server-Sent Events message per delivery. */
    SSE,
    /** A subscribed {@code GET /ws} connection: one text message per delivery. */
    WEBSOCKET,
    /** A gRPC {@code Subscribe} stream (spec §16): one {@code Delivery} message per delivery. */
    GRPC
}
