package serverlab.tomcat;

import jakarta.servlet.http.HttpServletResponse;
import jakarta.servlet.http.HttpServletResponseWrapper;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A gRPC answer's status always in trailers on Tomcat. grpc-servlet answers a call that ends
 * before any message (an error, an unknown method) "trailers-only": the status as headers,
 * then it completes. HTTP/2 wants that as one HEADERS frame with END_STREAM (spec §16), but
 * Tomcat commits the headers before it closes the body, so it sends HEADERS, then an empty
 * DATA frame with END_STREAM, which grpc-java's client refuses ("Received unexpected EOS on
 * empty DATA frame from server": INTERNAL instead of the call's status). Moved to trailer
 * fields, the status leaves as trailers (a HEADERS frame with END_STREAM) after the headers,
 * which every client reads; §16 allows an answer without messages either form.
 */
final class StatusInTrailers extends HttpServletResponseWrapper {
    /** The fields gRPC sends in trailers (grpc/grpc's PROTOCOL-HTTP2.md, "Status"). */
    private static final Set<String> STATUS_FIELDS = Set.of("grpc-status", "grpc-message", "grpc-status-details-bin");

    private final Map<String, String> trailers = new ConcurrentHashMap<>();

    StatusInTrailers(HttpServletResponse response) {
        super(response);
    }

    @Override
    public void addHeader(String name, String value) {
        if (isCommitted() || !STATUS_FIELDS.contains(name.toLowerCase(Locale.ROOT))) {
            super.addHeader(name, value);
            return;
        }
        if (trailers.isEmpty()) {
            super.setTrailerFields(() -> trailers);
        }
        trailers.merge(name, value, (first, next) -> first + "," + next);
    }
}
