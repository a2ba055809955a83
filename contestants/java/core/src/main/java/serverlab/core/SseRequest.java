package serverlab.core;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Pattern;

/** A validated {@code GET /sse} query (spec §10): the stream's events, heartbeat and duration. */
public final class SseRequest {
    public static final long DEFAULT_HEARTBEAT_MS = 15_000;
    private static final Pattern DECIMAL = Pattern.compile("[0-9]{1,9}");

    private final PushSpec spec;
    private final long heartbeatMs;

    private SseRequest(PushSpec spec, long heartbeatMs) {
        this.spec = spec;
        this.heartbeatMs = heartbeatMs;
    }

    public PushSpec spec() {
        return spec;
    }

    /** The heartbeat interval in milliseconds; 0 sends none. */
    public long heartbeatMs() {
        return heartbeatMs;
    }

    /** Parses the raw (still percent-encoded) query string; null means none. */
    public static SseRequest parse(String rawQuery) {
        Map<String, String> params = decode(rawQuery);
        String events = params.get("events");
        if (events == null) {
            throw ApiException.badRequest("events is required");
        }
        var names = PushSpec.distinctNames(Arrays.asList(events.split(",", -1)));
        names.forEach(EventName::require);
        ObjectNode request = Json.MAPPER.createObjectNode().put("type", "sse");
        names.forEach(request.putArray("events")::add);
        Long heartbeatMs = integer(params, "heartbeat_ms", 10, request);
        if (heartbeatMs == null) {
            heartbeatMs = DEFAULT_HEARTBEAT_MS;
        }
        Long durationMs = integer(params, "duration_ms", 1, request);
        return new SseRequest(new PushSpec(Transport.SSE, names, durationMs, request.toString()), heartbeatMs);
    }

    /** application/x-www-form-urlencoded, each parameter at most once. */
    private static Map<String, String> decode(String rawQuery) {
        Map<String, String> params = new HashMap<>();
        if (rawQuery == null) {
            return params;
        }
        for (String pair : rawQuery.split("&")) {
            if (pair.isEmpty()) {
                continue;
            }
            int eq = pair.indexOf('=');
            String key = eq < 0 ? pair : pair.substring(0, eq);
            String value = eq < 0 ? "" : pair.substring(eq + 1);
            try {
                key = URLDecoder.decode(key, StandardCharsets.UTF_8);
                value = URLDecoder.decode(value, StandardCharsets.UTF_8);
            } catch (IllegalArgumentException malformed) {
                throw ApiException.badRequest("malformed query");
            }
            if (params.put(key, value) != null) {
                throw ApiException.badRequest("a parameter is given twice");
            }
        }
        return params;
    }

    /**
     * An optional integer parameter from {@code min} to 3,600,000 (a heartbeat may also be 0),
     * echoed into the request document; null when absent.
     */
    private static Long integer(Map<String, String> params, String key, long min, ObjectNode request) {
        String text = params.get(key);
        if (text == null) {
            return null;
        }
        long value = DECIMAL.matcher(text).matches() ? Long.parseLong(text) : -1;
        boolean noHeartbeat = value == 0 && key.equals("heartbeat_ms");
        if (!noHeartbeat && (value < min || value > PushSpec.MAX_DURATION_MS)) {
            throw ApiException.badRequest(key + " must be an integer from " + min + " to 3600000");
        }
        request.put(key, value);
        return value;
    }
}
