package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class SseStreamTest {
    @Test
    void readsLastEventIdPositions() {
        assertEquals(Map.of(), SseStream.parseLastEventId(null));
        assertEquals(Map.of(), SseStream.parseLastEventId(""));
        assertEquals(Map.of("e1", 17L, "e2", 0L), SseStream.parseLastEventId("e1:17,e2:0"));
        assertEquals(Map.of("e", 9007199254740991L), SseStream.parseLastEventId("e:9007199254740991"));
    }

    @Test
    void refusesMalformedLastEventIds() {
        for (String bad : List.of("17", "e1:017", "e1:17,", "e1:17,e1:18", "bad name:1", "e:-1", "e:1.0",
                "e:9007199254740992", "e:1 ")) {
            assertEquals(400, assertThrows(ApiException.class, () -> SseStream.parseLastEventId(bad), bad).status());
        }
    }

    @Test
    void everyMessageCarriesThePositionAfterIt() {
        PushSpec spec = SseRequest.parse("events=a,b").spec();
        SseStream stream = new SseStream(new Subscriber(spec, delivery -> true, 0, 1));
        stream.position("a", 3);
        stream.position("b", 0);
        assertEquals("event: gap\nid: a:6,b:0\ndata: {\"gap\":{\"name\":\"a\",\"after\":3,\"next\":7}}\n\n",
                text(stream.gap("a", 3, 7)));
        assertEquals("id: a:6,b:4\ndata: {}\n\n", text(stream.event("b", 4, "{}".getBytes(StandardCharsets.UTF_8))));
        assertEquals("id: a:6,b:4\n\n", text(stream.openingMessage()));
        assertEquals("event: timeout\ndata: {}\n\n", text(SseStream.timeout("{}".getBytes(StandardCharsets.UTF_8))));
    }

    private static String text(byte[] message) {
        return new String(message, StandardCharsets.UTF_8);
    }
}
