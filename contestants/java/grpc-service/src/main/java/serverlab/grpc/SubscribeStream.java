package serverlab.grpc;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import java.util.concurrent.locks.ReentrantLock;
import serverlab.core.PushSpec;
import serverlab.core.RequestManager;
import serverlab.core.Subscriber;
import serverlab.v1.Serverlab.Delivery;

/**
 * One held {@code Subscribe} call as core's push sees it: a {@link serverlab.core.PushSink}
 * whose deliveries are written by the emitter's own thread (or a publisher's), as Tomcat's
 * WebSocket deliveries are, and which leaves every list when grpc-java reports the call
 * cancelled: its client reset it or closed the connection, or its deadline passed.
 */
final class SubscribeStream {
    private final ServerCallStreamObserver<Delivery> observer;
    /**
     * A call's messages are sent one at a time, while emitters of its several events may
     * deliver at once. A lock, not a monitor: a virtual thread writing under a monitor pins its
     * carrier on JDKs before 24.
     */
    private final ReentrantLock lock = new ReentrantLock();
    private volatile Subscriber subscriber;

    SubscribeStream(ServerCallStreamObserver<Delivery> observer) {
        this.observer = observer;
    }

    /** Registers the stream with its events; it then waits, holding no thread. */
    void open(RequestManager manager, PushSpec spec) {
        observer.setOnCancelHandler(() -> leave(manager));
        subscriber = manager.register(spec, this::deliver);
        if (observer.isCancelled()) {
            leave(manager);
        }
    }

    private void leave(RequestManager manager) {
        Subscriber registered = subscriber;
        if (registered != null) {
            manager.abandon(registered);
        }
    }

    /**
     * Sends one {@code Delivery}, its {@code sent} taken right before the send (§6); false when
     * the call is over, so the manager drops it. A client so far behind that grpc-java's
     * outbound buffer for the call is full (not ready) is ended RESOURCE_EXHAUSTED (§16).
     */
    private boolean deliver(serverlab.core.Delivery delivery) {
        lock.lock();
        try {
            if (observer.isCancelled()) {
                return false;
            }
            if (!observer.isReady()) {
                observer.onError(Status.RESOURCE_EXHAUSTED
                        .withDescription("the subscriber fell too far behind").asRuntimeException());
                return false;
            }
            observer.onNext(message(delivery.stamped()));
            return true;
        } catch (StatusRuntimeException | IllegalStateException over) {
            return false; // cancelled between the check and the send
        } finally {
            lock.unlock();
        }
    }

    private static Delivery message(serverlab.core.Delivery.Stamped fields) {
        Delivery.Builder message = Delivery.newBuilder().setName(fields.event()).setSeq(fields.seq())
                .setCreated(fields.created()).setSent(fields.sent()).setTotal(fields.total())
                .setPlace(fields.place());
        if (fields.dataJson() != null) {
            message.setData(fields.dataJson());
        }
        return message.build();
    }
}
