package serverlab.core;

/**
 * Where an emitter hands a delivery: the one piece of the Request Manager that each
 * request-handling model implements its own way (seed 004's Observer).
 */
@FunctionalInterface
public interface PushSink {
    /**
     * Called on an emitter thread, outside every lock of the manager. The body is a complete
     * long-poll answer, or one comet line ending in a newline. Returns false when the client is
     * known to be gone, so the manager drops the request.
     */
    boolean deliver(byte[] body);
}
