package serverlab.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.netty.channel.DefaultEventLoop;
import io.netty.channel.EventLoop;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import serverlab.core.PushSpec;
import serverlab.core.RequestManager;
import serverlab.core.Stats;
import serverlab.core.Transport;
import serverlab.v1.Serverlab.Delivery;

/**
 * A Subscribe stream whose client stops reading: buffered up to a bound, then ended
 * RESOURCE_EXHAUSTED and dropped from every list (spec §16). The call is a stand-in whose
 * readiness the test sets, on a real Netty event loop; the cycles are core's.
 */
class GrpcSubscriptionTest {
    private final EventLoop loop = new DefaultEventLoop();
    private final RequestManager manager = new RequestManager(new Stats("test"));

    @AfterEach
    void stopLoop() {
        loop.shutdownGracefully(0, 0, TimeUnit.SECONDS).syncUninterruptibly();
    }

    @Test
    void aStreamNeverReadyIsEndedResourceExhaustedOnlyPastTheBound() throws Exception {
        Call call = subscribe(false);
        publish(GrpcSubscription.MAX_BEHIND);
        assertNull(call.status, "within the bound");
        assertEquals(GrpcSubscription.MAX_BEHIND, call.messages.get());
        publish(1);
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, call.status.getCode());
        assertEquals(GrpcSubscription.MAX_BEHIND, call.messages.get(), "nothing written past the bound");
        assertEquals(0, manager.open(Transport.GRPC));
    }

    @Test
    void aStreamThatStaysReadyTakesEveryDelivery() throws Exception {
        Call call = subscribe(true);
        publish(GrpcSubscription.MAX_BEHIND + 10);
        assertNull(call.status);
        assertEquals(GrpcSubscription.MAX_BEHIND + 10, call.messages.get());
        assertEquals(1, manager.open(Transport.GRPC));
    }

    /** Starts a subscription on the loop, as grpc-java's direct executor does. */
    private Call subscribe(boolean ready) throws Exception {
        Call call = new Call(ready);
        loop.submit(() -> new GrpcSubscription(call, manager).start(PushSpec.grpc(List.of("e")))).sync();
        return call;
    }

    /** Publish cycles of "e", then waits until the loop has written what they handed it. */
    private void publish(int cycles) throws Exception {
        for (int i = 0; i < cycles; i++) {
            manager.publish("e", null);
        }
        loop.submit(() -> { }).sync();
    }

    /** The server side of a call: counts messages, keeps the status it ended with. */
    private static final class Call extends ServerCallStreamObserver<Delivery> {
        private final boolean ready;
        final AtomicInteger messages = new AtomicInteger();
        volatile Status status;

        Call(boolean ready) {
            this.ready = ready;
        }

        @Override
        public boolean isReady() {
            return ready;
        }

        @Override
        public void onNext(Delivery delivery) {
            messages.incrementAndGet();
        }

        @Override
        public void onError(Throwable error) {
            status = Status.fromThrowable(error);
        }

        @Override
        public void onCompleted() {
            status = Status.OK;
        }

        @Override
        public boolean isCancelled() {
            return false;
        }

        @Override
        public void setOnCancelHandler(Runnable onCancel) {
        }

        @Override
        public void setCompression(String compression) {
        }

        @Override
        public void setOnReadyHandler(Runnable onReady) {
        }

        @Override
        public void disableAutoInboundFlowControl() {
        }

        @Override
        public void request(int count) {
        }

        @Override
        public void setMessageCompression(boolean enable) {
        }
    }
}
