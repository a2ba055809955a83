package serverlab.netty;

import io.netty.handler.codec.http.HttpRequest;
import serverlab.core.ControlApi;

/** Counts responses for /stats and writes the per-request line while logging is on. */
final class ResponseLog {
    private final ControlApi control;

    ResponseLog(ControlApi control) {
        this.control = control;
    }

    String line(HttpRequest request) {
        return request.method().name() + " " + request.uri();
    }

    void responded(String requestLine, int status) {
        control.counters().responseSent();
        if (control.logging()) {
            System.err.println((requestLine == null ? "-" : requestLine) + " " + status);
        }
    }
}
