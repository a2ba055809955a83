package serverlab.core;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import java.util.function.ToIntFunction;

/**
 * The {@code GET /stats} counters (spec §5). LongAdder keeps the hot-path increments free of
 * contention; the sums are only read when {@code /stats} is asked.
 */
public final class Stats {
    public static final String SPEC_VERSION = "3.4";

    private final String serverName;
    private final long startedNanos = System.nanoTime();
    private final LongAdder connectionsTotal = new LongAdder();
    private final LongAdder connectionsClosed = new LongAdder();
    private final LongAdder requests = new LongAdder();
    private final LongAdder responses = new LongAdder();
    private final LongAdder pushResponses = new LongAdder();
    private final LongAdder timeouts = new LongAdder();
    private final LongAdder syslogReceived = new LongAdder();
    private final LongAdder syslogBytes = new LongAdder();
    private final LongAdder syslogTcpConnections = new LongAdder();
    private final LongAdder sseTotal = new LongAdder();
    private final LongAdder sseDeliveries = new LongAdder();
    private final LongAdder sseReplayed = new LongAdder();
    private final LongAdder sseGaps = new LongAdder();
    private final LongAdder sseHeartbeats = new LongAdder();
    private final LongAdder sseTimeouts = new LongAdder();
    private final LongAdder webSocketsOpen = new LongAdder();
    private final LongAdder webSocketsTotal = new LongAdder();
    private final LongAdder webSocketDeliveries = new LongAdder();
    private final LongAdder webSocketEchoes = new LongAdder();
    private final LongAdder webSocketPublishes = new LongAdder();
    private final LongAdder grpcCalls = new LongAdder();
    private final LongAdder grpcDeliveries = new LongAdder();
    /** Spec §5: group {@code grpc} is shown by a server that serves part {@code grpc} only. */
    private volatile boolean grpcServed;
    /** Spec §7.1: set on a syslog-parse server, whose /stats then shows its mode and parse counts. */
    private volatile SyslogParsing syslogParsing;
    private volatile LongSupplier openConnections = () -> connectionsTotal.sum() - connectionsClosed.sum();

    public Stats(String serverName) {
        this.serverName = serverName;
    }

    public String serverName() {
        return serverName;
    }

    /** For a platform that keeps its own count of open connections. */
    public void openConnectionsFrom(LongSupplier source) {
        openConnections = source;
    }

    public void connectionOpened() {
        connectionsTotal.increment();
    }

    public void connectionClosed() {
        connectionsClosed.increment();
    }

    public void requestRead() {
        requests.increment();
    }

    public void responseSent() {
        responses.increment();
    }

    /** A delivery of an emit cycle handed to a subscriber of this transport. */
    void delivered(Transport transport) {
        switch (transport) {
            case SSE -> sseDeliveries.increment();
            case WEBSOCKET -> webSocketDeliveries.increment();
            case GRPC -> grpcDeliveries.increment();
            default -> pushResponses.increment();
        }
    }

    /** A long poll's timeout answer, or the last message of a stream whose duration passed. */
    void timedOut(Transport transport) {
        if (transport == Transport.SSE) {
            sseTimeouts.increment();
        } else {
            timeouts.increment();
        }
    }

    void sseStarted() {
        sseTotal.increment();
    }

    void sseReplayed() {
        sseReplayed.increment();
    }

    void sseGap() {
        sseGaps.increment();
    }

    public void sseHeartbeat() {
        sseHeartbeats.increment();
    }

    /** A WebSocket handshake completed (101 sent); {@link #webSocketClosed} when its TCP connection ends. */
    public void webSocketOpened() {
        webSocketsTotal.increment();
        webSocketsOpen.increment();
    }

    public void webSocketClosed() {
        webSocketsOpen.decrement();
    }

    void webSocketEcho() {
        webSocketEchoes.increment();
    }

    void webSocketPublish() {
        webSocketPublishes.increment();
    }

    /** This server serves part {@code grpc} (§16): {@code /stats} shows group {@code grpc}. */
    public void serveGrpc() {
        grpcServed = true;
    }

    /**
     * A gRPC call started: an HTTP/2 request with a gRPC content-type, whatever its method.
     * It counts in {@code grpc.calls} only: its request is counted in {@code requests.total}
     * by whatever reads requests on its listener ({@link #requestRead}), as every other's.
     */
    public void grpcCall() {
        grpcCalls.increment();
    }

    public void syslogMessage(int length) {
        syslogReceived.increment();
        syslogBytes.add(length);
    }

    public void syslogConnection() {
        syslogTcpConnections.increment();
    }

    public void syslogParsing(SyslogParsing parsing) {
        syslogParsing = parsing;
    }

    public long syslogReceived() {
        return syslogReceived.sum();
    }

    /** The {@code /stats} document; open subscribers and events come from the request manager. */
    public Map<String, Object> snapshot(ToIntFunction<Transport> open, Map<String, Object> events) {
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("spec_version", SPEC_VERSION);
        doc.put("server", serverName);
        doc.put("uptime_ms", (System.nanoTime() - startedNanos) / 1_000_000);
        doc.put("connections", Map.of("open", openConnections.getAsLong(), "total", connectionsTotal.sum()));
        int openPush = open.applyAsInt(Transport.LONGPOLL) + open.applyAsInt(Transport.COMET);
        doc.put("requests", Map.of("total", requests.sum(), "open_push", openPush));
        doc.put("responses", Map.of("total", responses.sum(), "push", pushResponses.sum(),
                "timeouts", timeouts.sum()));
        doc.put("events", events);
        Map<String, Object> syslog = new LinkedHashMap<>(Map.of("received", syslogReceived.sum(),
                "bytes", syslogBytes.sum(), "tcp_connections", syslogTcpConnections.sum()));
        SyslogParsing parsing = syslogParsing;
        if (parsing != null) {
            parsing.putInto(syslog);
        }
        doc.put("syslog", syslog);
        doc.put("sse", Map.of("open", open.applyAsInt(Transport.SSE), "total", sseTotal.sum(),
                "deliveries", sseDeliveries.sum(), "replayed", sseReplayed.sum(), "gaps", sseGaps.sum(),
                "heartbeats", sseHeartbeats.sum(), "timeouts", sseTimeouts.sum()));
        doc.put("websocket", Map.of("open", webSocketsOpen.sum(), "total", webSocketsTotal.sum(),
                "subscribers", open.applyAsInt(Transport.WEBSOCKET), "deliveries", webSocketDeliveries.sum(),
                "echoes", webSocketEchoes.sum(), "publishes", webSocketPublishes.sum()));
        if (grpcServed) {
            doc.put("grpc", Map.of("calls", grpcCalls.sum(), "open", open.applyAsInt(Transport.GRPC),
                    "deliveries", grpcDeliveries.sum()));
        }
        return doc;
    }
}
