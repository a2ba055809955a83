package serverlab.core;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The {@code GET /stats} counters (spec §5). LongAdder keeps the hot-path increments free of
 * contention; the sums are only read when {@code /stats} is asked.
 */
public final class Stats {
    public static final String SPEC_VERSION = "2.1";

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

    public void pushDelivered() {
        pushResponses.increment();
    }

    public void timeoutAnswered() {
        timeouts.increment();
    }

    public void syslogMessage(int length) {
        syslogReceived.increment();
        syslogBytes.add(length);
    }

    public void syslogConnection() {
        syslogTcpConnections.increment();
    }

    public long syslogReceived() {
        return syslogReceived.sum();
    }

    /** The {@code /stats} document; events come from the request manager. */
    public Map<String, Object> snapshot(int openPush, Map<String, Object> events) {
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("spec_version", SPEC_VERSION);
        doc.put("server", serverName);
        doc.put("uptime_ms", (System.nanoTime() - startedNanos) / 1_000_000);
        doc.put("connections", Map.of("open", openConnections.getAsLong(), "total", connectionsTotal.sum()));
        doc.put("requests", Map.of("total", requests.sum(), "open_push", openPush));
        doc.put("responses", Map.of("total", responses.sum(), "push", pushResponses.sum(),
                "timeouts", timeouts.sum()));
        doc.put("events", events);
        doc.put("syslog", Map.of("received", syslogReceived.sum(), "bytes", syslogBytes.sum(),
                "tcp_connections", syslogTcpConnections.sum()));
        return doc;
    }
}
