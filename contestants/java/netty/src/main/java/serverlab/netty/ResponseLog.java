package serverlab.netty;

import io.netty.handler.codec.http.HttpRequest;
import serverlab.core.ControlApi;

/** Counts responses for /stats and writes the per-request line while logging is on. */
final class ResponseLog {
    private final ControlApi control;

    ResponseLog(ControlApi control) {
        this.control = control;
    }

    /** The request is null when nothing parseable was read. */
    void responded(HttpRequest request, int status) {
        control.counters().responseSent();
        if (control.logging()) {
            String line = request == null ? "-" : request.method().name() + " " + request.uri();
            System.err.println(line + " " + status);
        }
    }
}
