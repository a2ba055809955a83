package serverlab.core;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * The messages of one {@code /ws} connection (spec §11): subscribe, echo and publish, and the
 * close codes of messages this contract refuses. The platform's WebSocket implementation does
 * the framing (pongs, the closing handshake, 1002, 1007 and 1009) and hands over each
 * complete text message, one at a time.
 */
public final class WebSocketSession {
    /** The largest message accepted, in bytes after defragmenting. */
    public static final int MAX_MESSAGE = 65_536;
    public static final int UNSUPPORTED_DATA = 1003;
    public static final int POLICY_VIOLATION = 1008;
    public static final int MESSAGE_TOO_BIG = 1009;

    /** The connection as the platform's WebSocket implementation holds it. */
    public interface Connection {
        /**
         * Sends one text message at once, in the order of the calls; false when the
         * connection can no longer take it. May be called from any thread. The thread that
         * writes the message gets its bytes from {@code message} right before that write, so
         * that a delivery's {@code sent} is the moment of the write (spec §6).
         */
        boolean send(Supplier<byte[]> message);

        /** Sends a close frame with this code, then closes the connection. */
        void close(int code, String reason);
    }

    private final RequestManager manager;
    private final Stats stats;
    private final Connection connection;
    /**
     * Guards the subscription and every delivery, so none overtakes the subscribed reply. A
     * lock, not a monitor: a virtual thread writing under a monitor pins its carrier on JDKs
     * before 24.
     */
    private final ReentrantLock lock = new ReentrantLock();
    /** The connection's one subscription, and whether it has closed; guarded by the lock. */
    private Subscriber subscription;
    private boolean closed;

    public WebSocketSession(ControlApi control, Connection connection) {
        this.manager = control.requestManager();
        this.stats = control.counters();
        this.connection = connection;
    }

    /** A binary message: this contract takes text only. */
    public void onBinary() {
        connection.close(UNSUPPORTED_DATA, "binary messages are not accepted");
    }

    /** A complete, valid UTF-8 text message. */
    public void onText(String text) {
        try {
            JsonNode message = Json.MAPPER.readTree(text);
            if (message == null || !message.isObject()) {
                throw ApiException.badRequest("a message is one json object");
            }
            String type = message.path("type").asText("");
            switch (type) {
                case "subscribe" -> subscribe(message);
                case "echo" -> echo(message);
                case "publish" -> publish(message);
                default -> throw ApiException.badRequest("unknown message type");
            }
        } catch (JsonProcessingException malformed) {
            connection.close(POLICY_VIOLATION, "a message is one json object");
        } catch (ApiException refused) {
            connection.close(POLICY_VIOLATION, refused.getMessage());
        }
    }

    /** The connection has closed: its subscription, if any, leaves every list. */
    public void closed() {
        Subscriber gone;
        lock.lock();
        try {
            closed = true;
            gone = subscription;
        } finally {
            lock.unlock();
        }
        if (gone != null) {
            manager.abandon(gone);
        }
    }

    private void subscribe(JsonNode message) {
        JsonNode events = message.get("events");
        if (events == null || !events.isArray()) {
            throw ApiException.badRequest("events must be 1 to 16 distinct event names");
        }
        List<String> names = new ArrayList<>();
        for (JsonNode name : events) {
            names.add(EventName.require(name));
        }
        PushSpec spec = new PushSpec(Transport.WEBSOCKET, PushSpec.distinctNames(names), null, message.toString());
        lock.lock();
        try {
            if (subscription != null) {
                throw ApiException.badRequest("subscribed already");
            }
            if (closed) {
                return;
            }
            // Registered before the reply, so /stats counts it once the client has the reply.
            subscription = manager.register(spec, this::deliver);
            ObjectNode reply = Json.MAPPER.createObjectNode().put("type", "subscribed");
            reply.set("events", events);
            send(reply);
        } finally {
            lock.unlock();
        }
    }

    private boolean deliver(Delivery delivery) {
        lock.lock();
        try {
            return connection.send(delivery::body);
        } finally {
            lock.unlock();
        }
    }

    private void echo(JsonNode message) {
        ObjectNode reply = Json.MAPPER.createObjectNode().put("type", "echo");
        reply.set("data", message.has("data") ? message.get("data") : NullNode.getInstance());
        if (send(reply)) {
            stats.webSocketEcho();
        }
    }

    private void publish(JsonNode message) {
        String event = EventName.require(message.get("event"));
        JsonNode data = message.has("data") ? message.get("data") : NullNode.getInstance();
        stats.webSocketPublish();
        RequestManager.Published cycle = manager.publish(event, data.toString());
        ObjectNode reply = Json.MAPPER.createObjectNode().put("type", "published").put("event", event)
                .put("seq", cycle.seq()).put("total", cycle.total());
        send(reply);
    }

    private boolean send(ObjectNode reply) {
        byte[] bytes = Json.bytes(reply);
        return connection.send(() -> bytes);
    }
}
