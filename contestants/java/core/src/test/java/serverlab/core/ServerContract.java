package serverlab.core;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * What every Java front end must do with a real server on real sockets: listen on the
 * {@code --host} address besides loopback, stream SSE and speak WebSocket (spec §1, §10,
 * §11). Each server module's test extends it and says how its server starts; the
 * conformance cases (serverlab verify) check the rest.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
public abstract class ServerContract {
    /** A loopback address other than 127.0.0.1, as a lab host's own address would be. */
    protected static final String HOST = "127.0.0.2";
    private static final Duration WAIT = Duration.ofSeconds(10);

    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(WAIT).build();
    private int port;

    /** Starts the server with these command-line arguments; returns its HTTP port. */
    protected abstract int start(String... args) throws Exception;

    protected abstract void stop() throws Exception;

    @BeforeAll
    void startServer() throws Exception {
        Path docroot = Files.createTempDirectory("serverlab-contract");
        port = start("--port", "0", "--host", HOST, "--docroot", docroot.toString());
    }

    @AfterAll
    void stopServer() throws Exception {
        stop();
    }

    @Test
    void answersOnLoopbackAndOnTheHostAddress() throws Exception {
        for (String address : List.of(ListenAddresses.LOOPBACK, HOST)) {
            HttpResponse<byte[]> perf = client.send(get(address, "/perf"), HttpResponse.BodyHandlers.ofByteArray());
            assertEquals(200, perf.statusCode(), address);
            assertArrayEquals(Perf.body(), perf.body(), address);
        }
    }

    @Test
    void streamsServerSentEventsUntilTheirDuration() throws Exception {
        HttpResponse<Stream<String>> sse = client.send(get(ListenAddresses.LOOPBACK,
                "/sse?events=contract.sse&heartbeat_ms=0&duration_ms=1500"), HttpResponse.BodyHandlers.ofLines());
        assertEquals(200, sse.statusCode());
        assertEquals(SseStream.CONTENT_TYPE, sse.headers().firstValue("Content-Type").orElse(""));
        Iterator<String> lines = sse.body().iterator();
        assertEquals("id: contract.sse:0", lines.next(), "the opening message");
        post("/event/set", "{\"name\":\"contract.sse\",\"interval_ms\":100}");
        try {
            List<String> ids = new ArrayList<>();
            String line = lines.next();
            while (!line.equals("event: timeout")) {
                if (line.startsWith("id: ")) {
                    ids.add(line);
                } else if (line.startsWith("data: ")) {
                    JsonNode event = json(line.substring(6)).path("response").path("event");
                    assertEquals(ids.size(), event.path("seq").asInt(), "seq +1 per delivery");
                }
                line = lines.next();
            }
            assertTrue(ids.size() >= 3, ids.toString());
            assertEquals("id: contract.sse:" + ids.size(), ids.get(ids.size() - 1));
            assertTrue(json(lines.next().substring(6)).path("response").path("timeout").asBoolean());
        } finally {
            post("/event/clear", "{}");
        }
    }

    @Test
    void webSocketsEchoAndPublishToSubscribers() throws Exception {
        Messages subscriber = new Messages();
        Messages publisher = new Messages();
        WebSocket subscribed = connect(subscriber);
        WebSocket publishing = connect(publisher);
        subscribed.sendText("{\"type\":\"subscribe\",\"events\":[\"contract.ws\"]}", true);
        assertEquals("subscribed", subscriber.next().path("type").asText());
        publishing.sendText("{\"type\":\"publish\",\"event\":\"contract.ws\",\"data\":{\"n\":7}}", true);
        JsonNode delivery = subscriber.next();
        assertEquals(7, delivery.path("response").path("event").path("data").path("n").asInt());
        JsonNode published = publisher.next();
        assertEquals("published", published.path("type").asText());
        assertEquals(delivery.path("response").path("event").path("seq").asLong(), published.path("seq").asLong());
        assertEquals(1, published.path("total").asInt());
        publishing.sendText("{\"type\":\"echo\",\"data\":[1,\"two\"]}", true);
        assertEquals(json("[1,\"two\"]"), publisher.next().path("data"));
        publishing.sendText("{\"type\":\"dance\"}", true);
        assertEquals(WebSocketSession.POLICY_VIOLATION, publisher.closeCode.poll(WAIT.toSeconds(), TimeUnit.SECONDS));
        subscribed.sendClose(WebSocket.NORMAL_CLOSURE, "done").get();
        assertEquals(WebSocket.NORMAL_CLOSURE, subscriber.closeCode.poll(WAIT.toSeconds(), TimeUnit.SECONDS));
    }

    private HttpRequest get(String address, String target) {
        return HttpRequest.newBuilder(URI.create("http://" + address + ":" + port + target)).timeout(WAIT).build();
    }

    private void post(String target, String body) throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + target))
                .POST(HttpRequest.BodyPublishers.ofString(body)).timeout(WAIT).build();
        assertEquals(200, client.send(request, HttpResponse.BodyHandlers.discarding()).statusCode(), target);
    }

    private WebSocket connect(Messages messages) throws Exception {
        return client.newWebSocketBuilder().connectTimeout(WAIT)
                .buildAsync(URI.create("ws://127.0.0.1:" + port + "/ws"), messages).get(WAIT.toSeconds(), TimeUnit.SECONDS);
    }

    private static JsonNode json(String text) throws Exception {
        return Json.MAPPER.readTree(text);
    }

    /** A WebSocket client's inbox: each text message, and the server's close code. */
    private static final class Messages implements WebSocket.Listener {
        private final BlockingQueue<String> texts = new LinkedBlockingQueue<>();
        private final BlockingQueue<Integer> closeCode = new LinkedBlockingQueue<>();
        private final StringBuilder partial = new StringBuilder();

        @Override
        public CompletionStage<?> onText(WebSocket socket, CharSequence data, boolean last) {
            partial.append(data);
            if (last) {
                texts.add(partial.toString());
                partial.setLength(0);
            }
            socket.request(1);
            return null;
        }

        @Override
        public CompletionStage<?> onClose(WebSocket socket, int statusCode, String reason) {
            closeCode.add(statusCode);
            return null;
        }

        JsonNode next() throws Exception {
            String text = texts.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertNotNull(text, "no message within " + WAIT);
            return json(text);
        }
    }
}
