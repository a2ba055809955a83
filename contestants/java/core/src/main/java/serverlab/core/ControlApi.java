package serverlab.core;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The control endpoints (spec §5 and §6's event set/clear) as plain functions from validated
 * input to a JSON body, so every front end answers them with the same code.
 */
public final class ControlApi {
    private final Stats stats;
    private final RequestManager requestManager;
    private volatile boolean logging;

    public ControlApi(Stats stats, RequestManager requestManager) {
        this.stats = stats;
        this.requestManager = requestManager;
    }

    public Stats counters() {
        return stats;
    }

    public RequestManager requestManager() {
        return requestManager;
    }

    /** Whether one line per request goes to standard error (the seed 004 Log Manager). */
    public boolean logging() {
        return logging;
    }

    /** {@code GET /timestamp?client=<ms>}; {@code client} is the raw query value or null. */
    public byte[] timestamp(String client) {
        long server = System.currentTimeMillis();
        Long clientMs = client == null ? null : parseMillis(client);
        Map<String, Object> doc = new HashMap<>();
        doc.put("server", server);
        doc.put("client", clientMs);
        doc.put("offset_ms", clientMs == null ? null : server - clientMs);
        return Json.bytes(doc);
    }

    private static Long parseMillis(String value) {
        if (value.isEmpty() || value.length() > 18 || !value.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw ApiException.badRequest("client must be a non-negative integer");
        }
        return Long.parseLong(value);
    }

    /** {@code POST /logging}. */
    public byte[] logging(JsonNode body) {
        JsonNode enabled = Json.requireObject(body).get("enabled");
        if (enabled == null || !enabled.isBoolean()) {
            throw ApiException.badRequest("enabled must be true or false");
        }
        logging = enabled.booleanValue();
        return Json.bytes(Map.of("enabled", logging));
    }

    /** {@code POST /event/set}. */
    public byte[] eventSet(JsonNode body) {
        Json.requireObject(body);
        String name = EventName.require(body.get("name"));
        Long interval = Json.boundedLong(body, "interval_ms", 10, 3_600_000);
        if (interval == null) {
            throw ApiException.badRequest("interval_ms is required");
        }
        boolean replaced = requestManager.set(name, interval);
        return Json.bytes(Map.of("name", name, "interval_ms", interval, "replaced", replaced));
    }

    /** {@code POST /event/clear}: an empty body, {} or a null name clears every emitter. */
    public byte[] eventClear(JsonNode body) {
        JsonNode name = body == null ? null : Json.requireObject(body).get("name");
        List<String> cleared = name == null || name.isNull()
                ? requestManager.clearAll()
                : requestManager.clear(EventName.require(name));
        return Json.bytes(Map.of("cleared", cleared));
    }

    /** {@code GET /stats}. */
    public byte[] stats() {
        return Json.bytes(stats.snapshot(requestManager::open, requestManager.eventStats()));
    }
}
