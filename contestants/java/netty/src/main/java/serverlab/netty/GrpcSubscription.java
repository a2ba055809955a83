package serverlab.netty;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.internal.ThreadExecutorMap;
import serverlab.core.Delivery;
import serverlab.core.PushSink;
import serverlab.core.PushSpec;
import serverlab.core.RequestManager;
import serverlab.core.Subscriber;

/**
 * One gRPC {@code Subscribe} stream as a push subscriber (spec §16). Like an SSE stream, each
 * delivery reaches the event loop of the stream's connection as a task, where it is made (its
 * {@code sent}) and handed to grpc-java, which writes it on that loop. The stream ends by its
 * deadline or its client's cancellation (grpc-java cancels the call either way), or when its
 * client has fallen too far behind.
 */
final class GrpcSubscription implements PushSink {
    /**
     * Deliveries handed to grpc-java while the stream was not ready (its client not reading:
     * more than grpc-java's 32 KiB queued) before the stream is ended RESOURCE_EXHAUSTED rather
     * than buffered without bound: about 1 MiB of Delivery messages, go-nethttp's bound.
     */
    static final int MAX_BEHIND = 16_384;

    private final ServerCallStreamObserver<serverlab.v1.Serverlab.Delivery> call;
    private final RequestManager manager;
    /** The loop of the call's connection: the handler runs there (the server's direct executor). */
    private final EventExecutor loop;
    private Subscriber subscriber;
    /** Set on the loop; read by emitter threads, which then hand nothing more over. */
    private volatile boolean ended;
    /** Deliveries handed over since the stream was last ready; on the loop only. */
    private int behind;

    GrpcSubscription(ServerCallStreamObserver<serverlab.v1.Serverlab.Delivery> call, RequestManager manager) {
        this.call = call;
        this.manager = manager;
        this.loop = ThreadExecutorMap.currentExecutor();
        if (loop == null) {
            throw new IllegalStateException("a Subscribe call must run on its connection's event loop");
        }
    }

    /** On the loop: a subscriber from now on, until the call is cancelled. */
    void start(PushSpec spec) {
        call.setOnCancelHandler(this::end);
        subscriber = manager.register(spec, this);
    }

    /** Called on an emitter (or publisher) thread. */
    @Override
    public boolean deliver(Delivery delivery) {
        if (ended) {
            return false;
        }
        loop.execute(() -> write(delivery));
        return true;
    }

    private void write(Delivery delivery) {
        if (ended) {
            return;
        }
        behind = call.isReady() ? 0 : behind + 1;
        if (behind > MAX_BEHIND) {
            end();
            call.onError(Status.RESOURCE_EXHAUSTED.withDescription("the subscriber fell too far behind")
                    .asRuntimeException());
            return;
        }
        call.onNext(message(delivery.stamped()));
    }

    private static serverlab.v1.Serverlab.Delivery message(Delivery.Stamped stamped) {
        return serverlab.v1.Serverlab.Delivery.newBuilder().setName(stamped.event()).setSeq(stamped.seq())
                .setCreated(stamped.created()).setSent(stamped.sent()).setTotal(stamped.total())
                .setPlace(stamped.place()).setData(stamped.dataJson() == null ? "" : stamped.dataJson())
                .build();
    }

    /** On the loop: out of every list, and no delivery written after this. */
    private void end() {
        ended = true;
        manager.abandon(subscriber);
    }
}
