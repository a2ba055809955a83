package serverlab.core;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One SSE stream (spec §10): its subscriber, its position ({@code name:seq} per event, in the
 * order of {@code events}) and the framing of its messages, each of which ends in an empty
 * line and is written with one flush. Not thread-safe: each transport writes one stream's
 * messages one at a time, in the order it frames them, so every id names the position after
 * its message.
 */
public final class SseStream {
    public static final String CONTENT_TYPE = "text/event-stream";
    public static final byte[] HEARTBEAT = ": heartbeat\n\n".getBytes(StandardCharsets.US_ASCII);
    /** 2^53 - 1: the largest seq a Last-Event-ID may name. */
    private static final long MAX_SEQ = (1L << 53) - 1;
    private static final Pattern POSITION = Pattern.compile("([A-Za-z0-9_.-]{1,64}):(0|[1-9][0-9]{0,15})");

    private final Subscriber subscriber;
    private final Map<String, Long> positions = new LinkedHashMap<>();
    private byte[] opening;

    SseStream(Subscriber subscriber) {
        this.subscriber = subscriber;
    }

    public Subscriber subscriber() {
        return subscriber;
    }

    /**
     * What goes before the live messages: gap and replayed messages of each event the client
     * is behind on, then the opening message. Read once, right after registering.
     */
    public byte[] opening() {
        return opening;
    }

    /** A live delivery of an emit cycle (the document the manager handed the stream's sink). */
    public byte[] event(String name, long seq, byte[] json) {
        positions.put(name, seq);
        return message(null, true, json);
    }

    /** The last message of a stream whose duration has passed: the §6 timeout answer, no id. */
    public static byte[] timeout(byte[] json) {
        return frame("timeout", null, json);
    }

    void position(String name, long seq) {
        positions.put(name, seq);
    }

    void setOpening(byte[] opening) {
        this.opening = opening;
    }

    byte[] gap(String name, long after, long next) {
        positions.put(name, next - 1);
        String gap = "{\"gap\":{\"name\":\"" + name + "\",\"after\":" + after + ",\"next\":" + next + "}}";
        return message("gap", true, gap.getBytes(StandardCharsets.US_ASCII));
    }

    /** The opening message: the position and no data, so the client dispatches nothing. */
    byte[] openingMessage() {
        return message(null, true, null);
    }

    private byte[] message(String event, boolean withId, byte[] data) {
        return frame(event, withId ? id() : null, data);
    }

    private static byte[] frame(String event, String id, byte[] data) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(64 + (data == null ? 0 : data.length));
        if (event != null) {
            out.writeBytes(("event: " + event + "\n").getBytes(StandardCharsets.US_ASCII));
        }
        if (id != null) {
            out.writeBytes(("id: " + id + "\n").getBytes(StandardCharsets.US_ASCII));
        }
        if (data != null) {
            out.writeBytes("data: ".getBytes(StandardCharsets.US_ASCII));
            out.writeBytes(data);
            out.write('\n');
        }
        out.write('\n');
        return out.toByteArray();
    }

    private String id() {
        StringBuilder id = new StringBuilder();
        for (Map.Entry<String, Long> position : positions.entrySet()) {
            if (id.length() > 0) {
                id.append(',');
            }
            id.append(position.getKey()).append(':').append(position.getValue());
        }
        return id.toString();
    }

    /**
     * A {@code Last-Event-ID} header as event name to seq; empty for an absent or empty header.
     * Anything not of the {@code name:seq,...} form is a 400.
     */
    public static Map<String, Long> parseLastEventId(String header) {
        Map<String, Long> named = new LinkedHashMap<>();
        if (header == null || header.isEmpty()) {
            return named;
        }
        for (String pair : header.split(",", -1)) {
            Matcher matcher = POSITION.matcher(pair);
            if (!matcher.matches()) {
                throw malformedId();
            }
            long seq = Long.parseLong(matcher.group(2));
            if (seq > MAX_SEQ || named.put(matcher.group(1), seq) != null) {
                throw malformedId();
            }
        }
        return named;
    }

    private static ApiException malformedId() {
        return ApiException.badRequest("malformed last-event-id");
    }
}
