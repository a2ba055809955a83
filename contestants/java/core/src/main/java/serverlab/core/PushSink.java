package serverlab.core;

/**
 * Where an emitter hands a delivery: the one piece of the Request Manager that each
 * request-handling model and transport implements its own way (seed 004's Observer).
 */
@FunctionalInterface
public interface PushSink {
    /**
     * Called on an emitter thread (or a publisher's), outside every lock of the manager, with
     * a delivery not yet made. The thread that writes it makes its bytes with
     * {@link Delivery#body()} immediately before that write (spec §6), once, and not at all if
     * it is never written. Its body is the §6 delivery document: a complete long-poll answer,
     * a comet line ending in a newline, or the bare document an SSE message or a WebSocket
     * message carries; its event and seq say which cycle it is of, for the SSE id. Returns
     * false when the client is known to be gone, so the manager drops the subscriber.
     */
    boolean deliver(Delivery delivery);
}
