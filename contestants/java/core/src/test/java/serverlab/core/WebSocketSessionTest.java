package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The message protocol of spec §11 over a recording connection: the framing belongs to the
 * platforms' WebSocket libraries, whose servers ServerContract and verify test for real.
 */
class WebSocketSessionTest {
    private final Stats stats = new Stats("test");
    private final ControlApi control = new ControlApi(stats, new RequestManager(stats));

    /** What a session sent, in order, and the code it closed with. */
    private static final class Recorded implements WebSocketSession.Connection {
        final List<JsonNode> sent = new ArrayList<>();
        Integer closeCode;

        @Override
        public synchronized boolean send(Supplier<byte[]> message) {
            byte[] json = message.get();
            sent.add(Json.parse(json, 0, json.length));
            return closeCode == null;
        }

        @Override
        public synchronized void close(int code, String reason) {
            closeCode = code;
        }
    }

    @Test
    void echoesAnyJsonValue() {
        Recorded connection = new Recorded();
        WebSocketSession session = new WebSocketSession(control, connection);
        session.onText("{\"type\":\"echo\",\"data\":{\"é\":[true,null]}}");
        session.onText("{\"type\":\"echo\"}");
        assertEquals("{\"type\":\"echo\",\"data\":{\"é\":[true,null]}}", connection.sent.get(0).toString());
        assertEquals("{\"type\":\"echo\",\"data\":null}", connection.sent.get(1).toString());
        assertNull(connection.closeCode);
    }

    @Test
    void aPublisherSubscribedToItsEventGetsItsDeliveryBeforeThePublishedReply() {
        Recorded connection = new Recorded();
        WebSocketSession session = new WebSocketSession(control, connection);
        session.onText("{\"type\":\"subscribe\",\"events\":[\"p\"],\"x\":1}");
        session.onText("{\"type\":\"publish\",\"event\":\"p\",\"data\":[1]}");
        assertEquals("{\"type\":\"subscribed\",\"events\":[\"p\"]}", connection.sent.get(0).toString());
        JsonNode delivery = connection.sent.get(1);
        assertEquals("{\"type\":\"subscribe\",\"events\":[\"p\"],\"x\":1}", delivery.path("request").toString());
        assertEquals("[1]", delivery.path("response").path("event").path("data").toString());
        assertEquals("{\"type\":\"published\",\"event\":\"p\",\"seq\":1,\"total\":1}", connection.sent.get(2).toString());
        session.closed();
        assertEquals(0, control.requestManager().open(Transport.WEBSOCKET));
    }

    @Test
    void closesWithThePolicyCodeOnWhatTheContractRefuses() {
        for (String bad : List.of("not json", "[1]", "{\"type\":\"dance\"}", "{\"data\":1}",
                "{\"type\":\"subscribe\",\"events\":[]}", "{\"type\":\"subscribe\",\"events\":[\"a\",\"a\"]}",
                "{\"type\":\"subscribe\",\"events\":[\"no spaces\"]}", "{\"type\":\"publish\"}",
                "{\"type\":\"publish\",\"event\":7}")) {
            Recorded connection = new Recorded();
            new WebSocketSession(control, connection).onText(bad);
            assertEquals(WebSocketSession.POLICY_VIOLATION, connection.closeCode, bad);
        }
        Recorded twice = new Recorded();
        WebSocketSession session = new WebSocketSession(control, twice);
        session.onText("{\"type\":\"subscribe\",\"events\":[\"a\"]}");
        session.onText("{\"type\":\"subscribe\",\"events\":[\"b\"]}");
        assertEquals(WebSocketSession.POLICY_VIOLATION, twice.closeCode, "a second subscribe");
        Recorded binary = new Recorded();
        new WebSocketSession(control, binary).onBinary();
        assertEquals(WebSocketSession.UNSUPPORTED_DATA, binary.closeCode);
    }
}
