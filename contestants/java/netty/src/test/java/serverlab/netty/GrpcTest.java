package serverlab.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import serverlab.core.Args;
import serverlab.core.Perf;
import serverlab.v1.LabGrpc;
import serverlab.v1.Serverlab.Delivery;
import serverlab.v1.Serverlab.EchoMessage;
import serverlab.v1.Serverlab.PerfReply;
import serverlab.v1.Serverlab.PerfRequest;
import serverlab.v1.Serverlab.SubscribeRequest;

/**
 * Spec §16 on a real java-netty: grpc-java's own client (grpc-netty) on a real socket to the
 * gRPC port, and the push control calls and {@code /stats} over HTTP/1.1, as the lab drives them.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class GrpcTest {
    private static final long WAIT_MS = 10_000;
    /** A loopback address other than 127.0.0.1, as a lab host's own address would be. */
    private static final String HOST = "127.0.0.2";
    private static final ObjectMapper JSON = new ObjectMapper();

    private Main.Running server;
    private ManagedChannel channel;
    private final HttpClient http = HttpClient.newHttpClient();

    @BeforeAll
    void startServer(@TempDir Path dir) throws Exception {
        server = Main.start(new Args(new String[] {"--port", "0", "--docroot", dir.toString(), "--threads", "2",
                "--host", HOST, "--grpc-port", "0"}));
        channel = NettyChannelBuilder.forAddress("127.0.0.1", server.grpcPort()).usePlaintext().build();
    }

    @AfterAll
    void stopServer() throws InterruptedException {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        server.stop();
    }

    private LabGrpc.LabBlockingStub lab() {
        return LabGrpc.newBlockingStub(channel).withDeadlineAfter(WAIT_MS, TimeUnit.MILLISECONDS);
    }

    @Test
    void perfAnswersThePerfBodyAndCountsTheCallAsAnHttp2Request() throws Exception {
        JsonNode before = stats();
        PerfReply reply = lab().perf(PerfRequest.getDefaultInstance());
        assertArrayEquals(Perf.body(), reply.getBody().toByteArray());
        JsonNode after = stats();
        assertTrue(after.at("/grpc/calls").asLong() >= before.at("/grpc/calls").asLong() + 1);
        // This /stats request and the call at least.
        assertTrue(after.at("/requests/total").asLong() >= before.at("/requests/total").asLong() + 2);
    }

    @Test
    void theGrpcPortListensOnTheHostAddressToo() throws InterruptedException {
        ManagedChannel host = NettyChannelBuilder.forAddress(HOST, server.grpcPort()).usePlaintext().build();
        try {
            PerfReply reply = LabGrpc.newBlockingStub(host).withDeadlineAfter(WAIT_MS, TimeUnit.MILLISECONDS)
                    .perf(PerfRequest.getDefaultInstance());
            assertArrayEquals(Perf.body(), reply.getBody().toByteArray());
        } finally {
            host.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    @Test
    void echoServesAMessageOfExactlyFourMebibytesAndRefusesOneByteMoreThenServesOn() {
        byte[] limit = new byte[GrpcServers.MAX_MESSAGE - 5]; // the data's tag and length take 5 bytes
        limit[limit.length - 1] = 7;
        EchoMessage echoed = lab().echo(EchoMessage.newBuilder().setData(ByteString.copyFrom(limit)).build());
        assertArrayEquals(limit, echoed.getData().toByteArray());
        EchoMessage over = EchoMessage.newBuilder().setData(ByteString.copyFrom(new byte[limit.length + 1])).build();
        StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> lab().echo(over));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, refused.getStatus().getCode());
        assertEquals(84, lab().perf(PerfRequest.getDefaultInstance()).getBody().size());
    }

    @Test
    void aMethodTheServiceLacksIsUnimplemented() {
        MethodDescriptor<PerfRequest, PerfReply> nope = MethodDescriptor.<PerfRequest, PerfReply>newBuilder()
                .setType(MethodDescriptor.MethodType.UNARY).setFullMethodName("serverlab.v1.Lab/Nope")
                .setRequestMarshaller(ProtoUtils.marshaller(PerfRequest.getDefaultInstance()))
                .setResponseMarshaller(ProtoUtils.marshaller(PerfReply.getDefaultInstance())).build();
        StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> ClientCalls
                .blockingUnaryCall(channel, nope, CallOptions.DEFAULT, PerfRequest.getDefaultInstance()));
        assertEquals(Status.Code.UNIMPLEMENTED, refused.getStatus().getCode());
    }

    @Test
    void subscribeToABadNameOrToNoEventIsAnInvalidArgument() {
        for (SubscribeRequest bad : List.of(SubscribeRequest.newBuilder().addEvents("bad name").build(),
                SubscribeRequest.getDefaultInstance(),
                SubscribeRequest.newBuilder().addEvents("twice").addEvents("twice").build())) {
            Iterator<Delivery> stream = lab().subscribe(bad);
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, stream::hasNext);
            assertEquals(Status.Code.INVALID_ARGUMENT, refused.getStatus().getCode());
        }
    }

    @Test
    void aSubscribeHeldPastItsDeadlineEndsDeadlineExceededAndLeavesTheOpenCount() throws Exception {
        Iterator<Delivery> stream = LabGrpc.newBlockingStub(channel).withDeadlineAfter(300, TimeUnit.MILLISECONDS)
                .subscribe(SubscribeRequest.newBuilder().addEvents("deadline-unset").build());
        StatusRuntimeException ended = assertThrows(StatusRuntimeException.class, stream::hasNext);
        assertEquals(Status.Code.DEADLINE_EXCEEDED, ended.getStatus().getCode());
        awaitOpenStreams(0);
    }

    @Test
    void subscribeGetsOneDeliveryPerEmitCycleCountedInStatsUntilItsClientCancels() throws Exception {
        String event = "grpc-subscribe";
        long delivered = stats().at("/grpc/deliveries").asLong();
        BlockingQueue<Object> received = new LinkedBlockingQueue<>();
        io.grpc.Context.CancellableContext call = io.grpc.Context.current().withCancellation();
        call.run(() -> LabGrpc.newStub(channel).subscribe(SubscribeRequest.newBuilder().addEvents(event).build(),
                collect(received)));
        awaitOpenStreams(1);
        post("/event/set", "{\"name\":\"" + event + "\",\"interval_ms\":50}");
        List<Delivery> deliveries = new ArrayList<>();
        try {
            while (deliveries.size() < 3) {
                Object next = received.poll(WAIT_MS, TimeUnit.MILLISECONDS);
                assertTrue(next instanceof Delivery, "expected a delivery, got " + next);
                deliveries.add((Delivery) next);
            }
        } finally {
            post("/event/clear", "{\"name\":\"" + event + "\"}");
        }
        for (int i = 0; i < deliveries.size(); i++) {
            Delivery delivery = deliveries.get(i);
            assertEquals(event, delivery.getName());
            assertEquals(deliveries.get(0).getSeq() + i, delivery.getSeq());
            assertTrue(delivery.getCreated() > 0 && delivery.getCreated() <= delivery.getSent());
            assertTrue(delivery.getPlace() >= 1 && delivery.getPlace() <= delivery.getTotal());
            assertEquals("", delivery.getData());
        }
        assertTrue(stats().at("/grpc/deliveries").asLong() >= delivered + 3);
        call.cancel(null);
        awaitOpenStreams(0);
    }

    @Test
    void chatEchoesEveryMessageInOrderAndEndsOkAfterTheClientEndsItsSide() throws Exception {
        BlockingQueue<Object> received = new LinkedBlockingQueue<>();
        StreamObserver<EchoMessage> requests = LabGrpc.newStub(channel).chat(collect(received));
        List<String> words = List.of("one", "two", "three", "four", "five");
        for (String word : words) {
            requests.onNext(EchoMessage.newBuilder().setData(ByteString.copyFromUtf8(word)).build());
        }
        requests.onCompleted();
        for (String word : words) {
            Object next = received.poll(WAIT_MS, TimeUnit.MILLISECONDS);
            assertTrue(next instanceof EchoMessage, "expected an echo, got " + next);
            assertEquals(word, ((EchoMessage) next).getData().toStringUtf8());
        }
        assertEquals(Status.OK, received.poll(WAIT_MS, TimeUnit.MILLISECONDS));
    }

    /** Puts every message, then the call's status, on {@code into}. */
    private static <T> StreamObserver<T> collect(BlockingQueue<Object> into) {
        return new StreamObserver<>() {
            @Override
            public void onNext(T message) {
                into.add(message);
            }

            @Override
            public void onError(Throwable error) {
                into.add(Status.fromThrowable(error));
            }

            @Override
            public void onCompleted() {
                into.add(Status.OK);
            }
        };
    }

    /** Waits until {@code /stats} grpc.open is {@code want}: spec §6's 2 seconds, and then some. */
    private void awaitOpenStreams(int want) throws Exception {
        long deadline = System.currentTimeMillis() + 2_000;
        long open;
        while ((open = stats().at("/grpc/open").asLong()) != want && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(want, open, "/stats grpc.open");
    }

    private JsonNode stats() throws Exception {
        return JSON.readTree(send(HttpRequest.newBuilder(uri("/stats")).build()));
    }

    private void post(String path, String body) throws Exception {
        send(HttpRequest.newBuilder(uri(path)).POST(HttpRequest.BodyPublishers.ofString(body)).build());
    }

    private String send(HttpRequest request) throws Exception {
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
        assertEquals(200, response.statusCode(), response.body());
        return response.body();
    }

    private URI uri(String path) {
        return URI.create("http://127.0.0.1:" + server.port() + path);
    }
}
