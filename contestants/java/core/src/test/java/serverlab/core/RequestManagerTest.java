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
            manager.register(spec("{\"type\":\"longpoll\",\"events\":[\"e\"],\"duration_ms\":60000}"), delivery -> inbox.offer(delivery.body()));
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
        manager.register(spec("{\"type\":\"comet\",\"events\":[\"e\"]}"), delivery -> inbox.offer(delivery.body()));
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
                spec("{\"type\":\"longpoll\",\"events\":[\"a\",\"b\"],\"duration_ms\":5}"), delivery -> true);
        byte[] answer = manager.timeout(poll);
        assertTrue(new String(answer, StandardCharsets.UTF_8).contains("\"timeout\":true"));
        assertNull(manager.timeout(poll), "a second answer is refused");
        assertEquals(0, manager.openPush());
    }

    /** One message of an SSE opening: its fields, by name. */
    private static Map<String, String> fields(String message) {
        Map<String, String> fields = new java.util.HashMap<>();
        for (String line : message.split("\n")) {
            int colon = line.indexOf(": ");
            fields.put(line.substring(0, colon), line.substring(colon + 2));
        }
        return fields;
    }

    private static List<Map<String, String>> openingMessages(SseStream stream) {
        String text = new String(stream.opening(), StandardCharsets.UTF_8);
        assertTrue(text.endsWith("\n\n"), text);
        return java.util.Arrays.stream(text.split("\n\n")).map(RequestManagerTest::fields).toList();
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> group(String name) {
        return (Map<String, Object>) stats.snapshot(manager::open, manager.eventStats()).get(name);
    }

    @Test
    void oneCycleSnapshotsTheSubscribersOfEveryTransport() {
        List<String> order = new java.util.ArrayList<>();
        List<JsonNode> deliveries = new java.util.ArrayList<>();
        PushSink sink = delivery -> {
            byte[] body = delivery.body();
            deliveries.add(Json.parse(body, 0, body.length));
            return true;
        };
        manager.register(spec("{\"type\":\"longpoll\",\"events\":[\"e\"],\"duration_ms\":60000}"), sink);
        manager.register(spec("{\"type\":\"comet\",\"events\":[\"e\"]}"), sink);
        manager.registerSse(SseRequest.parse("events=e").spec(), Map.of(), sink);
        manager.register(new PushSpec(Transport.WEBSOCKET, List.of("e"), null, "{\"type\":\"subscribe\"}"), sink);
        RequestManager.Published cycle = manager.publish("e", "{\"n\":1}");
        assertEquals(new RequestManager.Published(1, 4), cycle);
        for (int place = 1; place <= 4; place++) {
            JsonNode delivery = deliveries.get(place - 1);
            JsonNode event = delivery.path("response").path("event");
            assertEquals(place, event.path("connections").path("place").asInt());
            assertEquals(4, event.path("connections").path("total").asInt());
            assertEquals(1, event.path("data").path("n").asInt(), "a publish cycle carries its data");
            assertEquals(place, delivery.path("connections").path("start").asInt());
            order.add(delivery.path("request").path("type").asText());
        }
        assertEquals(List.of("longpoll", "comet", "sse", "subscribe"), order);
        assertEquals(1, manager.openPush(), "the long poll was answered");
        assertEquals(1L, group("sse").get("deliveries"));
        assertEquals(1, group("sse").get("open"));
        assertEquals(1L, group("websocket").get("deliveries"));
        assertEquals(1, group("websocket").get("subscribers"));
        @SuppressWarnings("unchecked")
        Map<String, Object> e = (Map<String, Object>) manager.eventStats().get("e");
        assertEquals(Map.of("interval_ms", 0L, "active", false, "emits", 1L, "last_seq", 1L, "deliveries", 4L),
                Map.of("interval_ms", e.get("interval_ms"), "active", e.get("active"), "emits", e.get("emits"),
                        "last_seq", e.get("last_seq"), "deliveries", e.get("deliveries")));
    }

    @Test
    void aReconnectingStreamGetsWhatItMissedThenTheOpening() {
        for (int i = 0; i < 5; i++) {
            manager.publish("r", "null");
        }
        SseStream stream = manager.registerSse(SseRequest.parse("events=r,other").spec(), Map.of("r", 2L),
                delivery -> true);
        List<Map<String, String>> messages = openingMessages(stream);
        assertEquals(List.of("r:3,other:0", "r:4,other:0", "r:5,other:0", "r:5,other:0"),
                messages.stream().map(message -> message.get("id")).toList());
        for (int i = 0; i < 3; i++) {
            String data = messages.get(i).get("data");
            JsonNode event = Json.parse(data.getBytes(StandardCharsets.UTF_8), 0, data.length())
                    .path("response").path("event");
            assertEquals(3 + i, event.path("seq").asInt());
            assertTrue(event.path("replayed").asBoolean());
            assertEquals(1, event.path("connections").path("total").asInt());
        }
        assertEquals(Map.of("id", "r:5,other:0"), messages.get(3), "the opening has no data");
        assertEquals(3L, group("sse").get("replayed"));
        assertEquals(0L, group("sse").get("gaps"));
    }

    @Test
    void aGapNamesWhatTheBufferNoLongerHolds() {
        for (int i = 0; i < 70; i++) {
            manager.publish("g", "null");
        }
        List<Map<String, String>> old = openingMessages(
                manager.registerSse(SseRequest.parse("events=g").spec(), Map.of("g", 2L), delivery -> true));
        assertEquals(Map.of("event", "gap", "id", "g:6", "data", "{\"gap\":{\"name\":\"g\",\"after\":2,\"next\":7}}"),
                old.get(0));
        assertEquals(1 + EventChannel.REPLAY_BUFFER + 1, old.size(), "the gap, exactly 64 replays, the opening");
        assertEquals("g:7", old.get(1).get("id"));
        List<Map<String, String>> future = openingMessages(
                manager.registerSse(SseRequest.parse("events=g").spec(), Map.of("g", 1000L), delivery -> true));
        assertEquals(List.of(
                Map.of("event", "gap", "id", "g:70", "data", "{\"gap\":{\"name\":\"g\",\"after\":1000,\"next\":71}}"),
                Map.of("id", "g:70")), future);
        assertEquals(2L, group("sse").get("gaps"));
        assertEquals(64L, group("sse").get("replayed"));
    }

    /** timings of a delivery made after {@code wait}, as its writer would make it then; and when. */
    private static long[] writeLate(Delivery delivery, long waitMs) throws InterruptedException {
        Thread.sleep(waitMs);
        byte[] body = delivery.body();
        long made = System.currentTimeMillis();
        JsonNode timings = Json.parse(body, 0, body.length).path("response").path("event").path("timings");
        return new long[] {timings.path("sent").asLong(), timings.path("duration").asLong(),
                timings.path("created").asLong(), made};
    }

    /**
     * A delivery's {@code sent} is the moment the thread that writes it makes its bytes (spec
     * §6), not the moment the emit cycle handed it over; the cycle's emit duration in /stats
     * runs to the latest such stamp, counted once per cycle.
     */
    @Test
    void sentIsTakenWhenTheDeliveryIsWrittenNotWhenItIsQueued() throws InterruptedException {
        BlockingQueue<Delivery> queued = new LinkedBlockingQueue<>();
        for (int i = 0; i < 2; i++) {
            manager.register(spec("{\"type\":\"comet\",\"events\":[\"e\"]}"), queued::offer);
        }
        manager.publish("e", "null");
        long handedOver = System.currentTimeMillis();
        @SuppressWarnings("unchecked")
        Map<String, Object> before = (Map<String, Object>) manager.eventStats().get("e");
        assertEquals(List.of(2L, 0L), List.of(before.get("deliveries"), before.get("max_emit_duration_ms")),
                "handed over, none written");
        long[] first = writeLate(queued.remove(), 30);
        long[] last = writeLate(queued.remove(), 30);
        assertTrue(first[0] >= handedOver + 30, "first sent " + first[0] + ", handed over at " + handedOver);
        assertTrue(last[0] >= first[0] + 30 && last[0] <= last[3], "last sent " + last[0] + ", made at " + last[3]);
        assertEquals(last[0] - last[2], last[1], "duration = sent - created");
        @SuppressWarnings("unchecked")
        Map<String, Object> after = (Map<String, Object>) manager.eventStats().get("e");
        assertEquals(List.of(last[1], last[1], last[1]), List.of(after.get("last_emit_duration_ms"),
                after.get("max_emit_duration_ms"), after.get("total_emit_duration_ms")));
    }

    /**
     * A gRPC Subscribe stream is a subscriber beside the other transports (spec §16): one
     * cycle's snapshot counts it with a long poll, its delivery's fields carry the cycle, and
     * /stats group grpc counts it open and its deliveries, on a server that serves gRPC only.
     */
    @Test
    void aGrpcStreamSharesTheCycleSnapshotAndIsCountedInStatsGrpc() throws InterruptedException {
        assertNull(Json.MAPPER.valueToTree(stats.snapshot(manager::open, Map.of())).get("grpc"),
                "no grpc group before the server serves gRPC");
        stats.serveGrpc();
        BlockingQueue<Delivery.Stamped> stream = new LinkedBlockingQueue<>();
        Subscriber grpc = manager.register(PushSpec.grpc(List.of("e")), delivery -> stream.offer(delivery.stamped()));
        BlockingQueue<byte[]> poll = new LinkedBlockingQueue<>();
        manager.register(spec("{\"type\":\"longpoll\",\"events\":[\"e\"],\"duration_ms\":60000}"),
                delivery -> poll.offer(delivery.body()));
        assertEquals(1, grpcStats().path("open").asInt());
        long before = System.currentTimeMillis();
        RequestManager.Published cycle = manager.publish("e", "{\"k\":1}");
        Delivery.Stamped fields = stream.poll(5, TimeUnit.SECONDS);
        assertNotNull(fields, "no delivery");
        JsonNode polled = next(poll).path("response").path("event");
        assertEquals(List.of("e", cycle.seq(), 2, 1, "{\"k\":1}"),
                List.of(fields.event(), fields.seq(), fields.total(), fields.place(), fields.dataJson()));
        assertEquals(List.of(cycle.seq(), 2, 2), List.of(polled.path("seq").asLong(),
                polled.path("connections").path("total").asInt(), polled.path("connections").path("place").asInt()));
        assertTrue(before <= fields.created() && fields.created() <= fields.sent(), fields.toString());
        assertEquals(1, grpcStats().path("deliveries").asLong());
        assertEquals(1L, group("responses").get("push"), "the long poll's answer only");
        manager.abandon(grpc);
        assertEquals(0, grpcStats().path("open").asInt());
    }

    private JsonNode grpcStats() {
        return Json.MAPPER.valueToTree(stats.snapshot(manager::open, Map.of())).path("grpc");
    }
}
