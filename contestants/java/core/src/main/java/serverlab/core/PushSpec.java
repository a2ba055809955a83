package serverlab.core;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/** A validated {@code POST /push} body (spec §6). */
public final class PushSpec {
    public static final int MAX_EVENTS = 16;
    public static final long MAX_DURATION_MS = 3_600_000;

    private final boolean longPoll;
    private final List<String> events;
    private final Long durationMs;
    private final String requestJson;

    private PushSpec(boolean longPoll, List<String> events, Long durationMs, String requestJson) {
        this.longPoll = longPoll;
        this.events = events;
        this.durationMs = durationMs;
        this.requestJson = requestJson;
    }

    public static PushSpec parse(JsonNode body) {
        Json.requireObject(body);
        JsonNode type = body.get("type");
        boolean longPoll;
        if (type != null && "longpoll".equals(type.textValue())) {
            longPoll = true;
        } else if (type != null && "comet".equals(type.textValue())) {
            longPoll = false;
        } else {
            throw ApiException.badRequest("type must be longpoll or comet");
        }
        JsonNode events = body.get("events");
        if (events == null || !events.isArray() || events.size() > MAX_EVENTS) {
            throw ApiException.badRequest("events must be an array of at most 16 names");
        }
        Set<String> names = new LinkedHashSet<>();
        for (JsonNode name : events) {
            names.add(EventName.require(name));
        }
        Long durationMs = Json.boundedLong(body, "duration_ms", 1, MAX_DURATION_MS);
        if (longPoll && durationMs == null) {
            throw ApiException.badRequest("duration_ms is required for longpoll");
        }
        return new PushSpec(longPoll, new ArrayList<>(names), durationMs, body.toString());
    }

    public boolean longPoll() {
        return longPoll;
    }

    public List<String> events() {
        return events;
    }

    /** The poll timeout or stream length in milliseconds, or null for an endless comet stream. */
    public Long durationMs() {
        return durationMs;
    }

    /** The request body as received, re-serialized, for the {@code request} field of answers. */
    String requestJson() {
        return requestJson;
    }
}
