package serverlab.tomcat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import serverlab.core.Json;
import serverlab.core.Perf;
import serverlab.v1.LabGrpc;
import serverlab.v1.Serverlab.Delivery;
import serverlab.v1.Serverlab.EchoMessage;
import serverlab.v1.Serverlab.PerfRequest;
import serverlab.v1.Serverlab.SubscribeRequest;

/**
 * Spec §16 on a real embedded Tomcat of one contestant's model, called over its h2c port by
 * grpc-java's own client (Netty transport): the service's answers, its place in the push
 * fan-out and {@code /stats}, and the threads its calls run on.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
public abstract class GrpcContract {
    private static final Duration WAIT = Duration.ofSeconds(10);
    private static final int LIMIT = 4 * 1024 * 1024;

    private final String name;
    private final TomcatServer.Model model;
    private final Predicate<Thread> callThread;
    private final String callThreadKind;
    /** Every thread a call's handler or listener ran on, recorded by the executor below. */
    private final Set<Thread> callThreads = ConcurrentHashMap.newKeySet();
    private final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(WAIT).build();
    private TomcatServer.Running server;
    private ManagedChannel channel;

    /** {@code callThread} says whether a thread is one the model runs gRPC calls on. */
    protected GrpcContract(String name, TomcatServer.Model model, Predicate<Thread> callThread, String callThreadKind) {
        this.name = name;
        this.model = model;
        this.callThread = callThread;
        this.callThreadKind = callThreadKind;
    }

    @BeforeAll
    void startServer() throws Exception {
        TomcatServer.Model recorded = new TomcatServer.Model(model.push(), model.sse(), model.threads(),
                threads -> recording(model.grpcCalls().create(threads)));
        String docroot = Files.createTempDirectory("serverlab-grpc").toString();
        server = new TomcatServer(name, new String[] {"--port", "0", "--docroot", docroot, "--h2c-port", "0"})
                .start(recorded);
        channel = Grpc.newChannelBuilderForAddress("127.0.0.1", server.h2cPort(), InsecureChannelCredentials.create())
                .maxInboundMessageSize(2 * LIMIT).build();
    }

    @AfterAll
    void stopServer() throws Exception {
        channel.shutdownNow().awaitTermination(WAIT.toSeconds(), TimeUnit.SECONDS);
        server.stop();
    }

    private Executor recording(Executor calls) {
        return task -> calls.execute(() -> {
            callThreads.add(Thread.currentThread());
            task.run();
        });
    }

    private LabGrpc.LabBlockingStub lab() {
        return LabGrpc.newBlockingStub(channel).withDeadlineAfter(WAIT.toSeconds(), TimeUnit.SECONDS);
    }

    @Test
    void perfAnswersThePerfBodyAndCountsTheCall() throws Exception {
        long before = stats().path("grpc").path("calls").asLong();
        assertArrayEquals(Perf.body(), lab().perf(PerfRequest.getDefaultInstance()).getBody().toByteArray());
        assertTrue(stats().path("grpc").path("calls").asLong() > before, "grpc.calls did not rise");
    }

    @Test
    void callsRunOnTheModelsThreads() {
        lab().perf(PerfRequest.getDefaultInstance());
        assertFalse(callThreads.isEmpty(), "no call ran on the model's executor");
        for (Thread thread : callThreads) {
            assertTrue(callThread.test(thread), thread + " is not " + callThreadKind);
        }
    }

    @Test
    void echoReturnsAMessageOfFourMibAndRefusesOneByteMore() {
        // An EchoMessage of n data bytes is encoded in n + 5 bytes at this size.
        byte[] data = new byte[LIMIT - 5];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i % 251);
        }
        EchoMessage largest = EchoMessage.newBuilder().setData(ByteString.copyFrom(data)).build();
        assertEquals(LIMIT, largest.getSerializedSize());
        assertEquals(largest, lab().echo(largest));
        EchoMessage over = largest.toBuilder().setData(largest.getData().concat(ByteString.copyFrom(new byte[1]))).build();
        StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> lab().echo(over));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, refused.getStatus().getCode(), refused.toString());
        assertEquals(Perf.body().length, lab().perf(PerfRequest.getDefaultInstance()).getBody().size(),
                "the connection serves on");
    }

    @Test
    void aMethodTheServiceLacksIsUnimplemented() {
        MethodDescriptor<byte[], byte[]> nope = MethodDescriptor.<byte[], byte[]>newBuilder()
                .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("serverlab.v1.Lab/Nope")
                .setRequestMarshaller(new Bytes()).setResponseMarshaller(new Bytes()).build();
        StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> ClientCalls.blockingUnaryCall(
                channel, nope, CallOptions.DEFAULT.withDeadlineAfter(WAIT.toSeconds(), TimeUnit.SECONDS), new byte[0]));
        assertEquals(Status.Code.UNIMPLEMENTED, refused.getStatus().getCode(), refused.toString());
    }

    @Test
    void subscribeRefusesEventNamesOutsideTheRule() {
        for (SubscribeRequest bad : List.of(SubscribeRequest.getDefaultInstance(),
                SubscribeRequest.newBuilder().addEvents("bad name").build(),
                SubscribeRequest.newBuilder().addEvents("twice").addEvents("twice").build())) {
            Iterator<Delivery> stream = lab().subscribe(bad);
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, stream::hasNext);
            assertEquals(Status.Code.INVALID_ARGUMENT, refused.getStatus().getCode(), bad + ": " + refused);
        }
    }

    @Test
    void aSubscribeStreamSharesEmitCyclesWithLongPollsAndLeavesWhenCancelled() throws Exception {
        String event = "grpc-" + name;
        BlockingQueue<Delivery> deliveries = new LinkedBlockingQueue<>();
        io.grpc.Context.CancellableContext call = io.grpc.Context.current().withCancellation();
        call.run(() -> LabGrpc.newStub(channel).subscribe(SubscribeRequest.newBuilder().addEvents(event).build(),
                collect(deliveries)));
        awaitStats("grpc", "open", 1);
        long deliveredBefore = stats().path("grpc").path("deliveries").asLong();
        var longPoll = http.sendAsync(post("/push",
                "{\"type\":\"longpoll\",\"events\":[\"" + event + "\"],\"duration_ms\":10000}"),
                HttpResponse.BodyHandlers.ofString());
        awaitStats("requests", "open_push", 1);
        assertEquals(200, http.send(post("/event/set", "{\"name\":\"" + event + "\",\"interval_ms\":50}"),
                HttpResponse.BodyHandlers.discarding()).statusCode());
        List<Delivery> got = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Delivery delivery = deliveries.poll(WAIT.toSeconds(), TimeUnit.SECONDS);
            assertNotNull(delivery, "no delivery within " + WAIT);
            got.add(delivery);
        }
        JsonNode answered = Json.MAPPER.readTree(longPoll.get(WAIT.toSeconds(), TimeUnit.SECONDS).body())
                .path("response").path("event");
        http.send(post("/event/clear", "{\"name\":\"" + event + "\"}"), HttpResponse.BodyHandlers.discarding());
        Delivery first = got.get(0);
        assertEquals(event, first.getName());
        // One snapshot spans both transports: the first cycle counted the long poll and the stream.
        assertEquals(answered.path("seq").asLong(), first.getSeq());
        assertEquals(2, first.getTotal());
        assertEquals(2, answered.path("connections").path("total").asInt());
        for (int i = 0; i < got.size(); i++) {
            Delivery delivery = got.get(i);
            assertEquals(first.getSeq() + i, delivery.getSeq(), "seq rises by one a cycle");
            assertTrue(delivery.getCreated() <= delivery.getSent(), delivery.toString());
            assertTrue(1 <= delivery.getPlace() && delivery.getPlace() <= delivery.getTotal(), delivery.toString());
        }
        assertTrue(stats().path("grpc").path("deliveries").asLong() - deliveredBefore >= 3);
        call.cancel(null);
        awaitStats("grpc", "open", 0);
    }

    /**
     * On a connection of its own, so that nothing before it has lowered Tomcat's overhead
     * count: each message is a small DATA frame that is not the stream's last.
     */
    @Test
    void chatEchoesEveryMessageInOrderAndEndsAfterTheClient() throws Exception {
        ManagedChannel own = Grpc.newChannelBuilderForAddress("127.0.0.1", server.h2cPort(),
                InsecureChannelCredentials.create()).build();
        try {
            chat(own);
        } finally {
            own.shutdownNow().awaitTermination(WAIT.toSeconds(), TimeUnit.SECONDS);
        }
    }

    private void chat(ManagedChannel own) throws Exception {
        BlockingQueue<EchoMessage> echoes = new LinkedBlockingQueue<>();
        Ended ended = new Ended();
        StreamObserver<EchoMessage> chat = LabGrpc.newStub(own).chat(collect(echoes, ended));
        for (int i = 0; i < 8; i++) {
            EchoMessage message = EchoMessage.newBuilder().setData(ByteString.copyFromUtf8("message " + i)).build();
            chat.onNext(message);
            // Each is echoed as soon as it is read, before the client sends the next.
            assertEquals(message, echoes.poll(WAIT.toSeconds(), TimeUnit.SECONDS));
        }
        chat.onCompleted();
        assertEquals(Status.Code.OK, ended.status.poll(WAIT.toSeconds(), TimeUnit.SECONDS).getCode());
        assertTrue(echoes.isEmpty(), "nothing but the echoes: " + echoes);
    }

    private JsonNode stats() throws Exception {
        HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + "/stats"))
                .timeout(WAIT).build();
        return Json.MAPPER.readTree(http.send(request, HttpResponse.BodyHandlers.ofString()).body());
    }

    /** Waits until {@code /stats} shows {@code want} at group.field (within WAIT, else fails). */
    private void awaitStats(String group, String field, long want) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        long seen;
        while ((seen = stats().path(group).path(field).asLong()) != want) {
            assertTrue(System.nanoTime() < deadline, group + "." + field + " is " + seen + ", expected " + want);
            Thread.sleep(20);
        }
    }

    private HttpRequest post(String target, String body) {
        return HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + target))
                .POST(HttpRequest.BodyPublishers.ofString(body)).timeout(WAIT).build();
    }

    private static <T> StreamObserver<T> collect(BlockingQueue<T> inbox) {
        return collect(inbox, new Ended());
    }

    private static <T> StreamObserver<T> collect(BlockingQueue<T> inbox, Ended ended) {
        return new StreamObserver<>() {
            @Override
            public void onNext(T message) {
                inbox.add(message);
            }

            @Override
            public void onError(Throwable error) {
                ended.status.add(Status.fromThrowable(error));
            }

            @Override
            public void onCompleted() {
                ended.status.add(Status.OK);
            }
        };
    }

    /** How a call ended, once it has. */
    private static final class Ended {
        private final BlockingQueue<Status> status = new LinkedBlockingQueue<>();
    }

    /** Raw bytes both ways, for a method no stub has. */
    private static final class Bytes implements MethodDescriptor.Marshaller<byte[]> {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}
