package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class RequestManagerTest {
    private final Stats stats = new Stats("test");
    private final RequestManager manager = new RequestManager(stats);

    private static PushSpec spec(String json) {
        byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
        return PushSpec.parse(Json.parse(bytes, 0, bytes.length));
    }

    private static JsonNode next(BlockingQueue<byte[]> inbox) throws InterruptedException {
        byte[] body = inbox.poll(5, TimeUnit.SECONDS);
        assertNotNull(body, "no delivery within 5 s");
        return Json.parse(body, 0, body.length);
    }

    @Test
    void oneEmitAnswersEveryLongPollInSubscriptionOrder() throws InterruptedException {
        BlockingQueue<byte[]> inbox = new LinkedBlockingQueue<>();
        for (int i = 0; i < 3; i++) {
            manager.register(spec("{\"type\":\"longpoll\",\"events\":[\"e\"],\"duration_ms\":60000}"), (event, seq, body) -> inbox.offer(body));
        }
        assertEquals(3, manager.openPush());
        manager.set("e", 20);
        for (int place = 1; place <= 3; place++) {
            JsonNode event = next(inbox).path("response").path("event");
            assertEquals(1, event.path("seq").asLong());
            assertEquals(place, event.path("connections").path("place").asInt());
            assertEquals(3, event.path("connections").path("total").asInt());
        }
        manager.clearAll();
        assertEquals(0, manager.openPush());
    }

    @Test
    void sequenceNumbersSurviveReplaceAndClear() throws InterruptedException {
        BlockingQueue<byte[]> inbox = new LinkedBlockingQueue<>();
        manager.register(spec("{\"type\":\"comet\",\"events\":[\"e\"]}"), (event, seq, body) -> inbox.offer(body));
        manager.set("e", 10);
        long first = next(inbox).path("response").path("event").path("seq").asLong();
        assertTrue(manager.set("e", 10), "an active emitter is replaced");
        assertEquals(List.of("e"), manager.clear("e"));
        assertThrows(ApiException.class, () -> manager.clear("e"));
        inbox.clear();
        manager.set("e", 10);
        long afterClear = next(inbox).path("response").path("event").path("seq").asLong();
        assertTrue(afterClear > first);
        long following = next(inbox).path("response").path("event").path("seq").asLong();
        assertEquals(afterClear + 1, following, "no gap and no repeat");
        manager.clearAll();
        @SuppressWarnings("unchecked")
        Map<String, Object> e = (Map<String, Object>) manager.eventStats().get("e");
        assertEquals(false, e.get("active"));
    }

    @Test
    void aTimedOutPollIsAnsweredOnceAndLeavesEveryList() {
        Subscriber poll = manager.register(
                spec("{\"type\":\"longpoll\",\"events\":[\"a\",\"b\"],\"duration_ms\":5}"), (event, seq, body) -> true);
        byte[] answer = manager.timeout(poll);
        assertTrue(new String(answer, StandardCharsets.UTF_8).contains("\"timeout\":true"));
        assertNull(manager.timeout(poll), "a second answer is refused");
        assertEquals(0, manager.openPush());
    }
}
