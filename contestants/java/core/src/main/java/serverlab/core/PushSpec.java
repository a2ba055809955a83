package serverlab.core;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * What a subscriber asked for: a validated {@code POST /push} body (spec §6), or the events
 * of an SSE stream (§10) or of a WebSocket's subscribe message (§11).
 */
public final class PushSpec {
    public static final int MAX_EVENTS = 16;
    public static final long MAX_DURATION_MS = 3_600_000;

    private final Transport transport;
    private final List<String> events;
    private final Long durationMs;
    private final String requestJson;

    PushSpec(Transport transport, List<String> events, Long durationMs, String requestJson) {
        this.transport = transport;
        this.events = events;
        this.durationMs = durationMs;
        this.requestJson = requestJson;
    }

    public static PushSpec parse(JsonNode body) {
        Json.requireObject(body);
        JsonNode type = body.get("type");
        Transport transport;
        if (type != null && "longpoll".equals(type.textValue())) {
            transport = Transport.LONGPOLL;
        } else if (type != null && "comet".equals(type.textValue())) {
            transport = Transport.COMET;
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
        if (transport == Transport.LONGPOLL && durationMs == null) {
            throw ApiException.badRequest("duration_ms is required for longpoll");
        }
        return new PushSpec(transport, new ArrayList<>(names), durationMs, body.toString());
    }

    /**
     * The 1 to 16 distinct event names SSE and WebSocket subscribers name (unlike {@code /push},
     * which drops repeats, they refuse them).
     */
    static List<String> distinctNames(List<String> names) {
        Set<String> distinct = new LinkedHashSet<>(names);
        if (names.isEmpty() || names.size() > MAX_EVENTS || distinct.size() != names.size()) {
            throw ApiException.badRequest("events must be 1 to 16 distinct event names");
        }
        return List.copyOf(names);
    }

    /**
     * A gRPC {@code Subscribe} request's events (spec §16): 1 to 16 distinct names of §6's
     * pattern, as SSE and WebSocket subscribers name them; anything else is a 400, which the
     * gRPC service answers INVALID_ARGUMENT.
     */
    public static PushSpec grpc(List<String> names) {
        for (String name : names) {
            EventName.require(name);
        }
        List<String> events = distinctNames(names);
        String requestJson = Json.MAPPER.createObjectNode().set("events", Json.MAPPER.valueToTree(events)).toString();
        return new PushSpec(Transport.GRPC, events, null, requestJson);
    }

    public Transport transport() {
        return transport;
    }

    public boolean longPoll() {
        return transport == Transport.LONGPOLL;
    }

    public List<String> events() {
        return events;
    }

    /** The poll timeout or stream length in milliseconds, or null for an endless stream. */
    public Long durationMs() {
        return durationMs;
    }

    /** The request body as received, re-serialized, for the {@code request} field of answers. */
    String requestJson() {
        return requestJson;
    }
}
