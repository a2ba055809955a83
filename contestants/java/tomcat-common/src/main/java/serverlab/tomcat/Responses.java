package serverlab.tomcat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.ApiException;
import serverlab.core.Json;
import serverlab.core.Stats;

/** Writing complete bodies of known length, the way every servlet here answers. */
public final class Responses {
    private Responses() {
    }

    public static void send(HttpServletResponse response, int status, String contentType, byte[] body)
            throws IOException {
        response.setStatus(status);
        response.setContentType(contentType);
        response.setContentLength(body.length);
        response.getOutputStream().write(body);
    }

    public static void json(HttpServletResponse response, byte[] body) throws IOException {
        send(response, 200, Json.CONTENT_TYPE, body);
    }

    /**
     * Sends a stream's header section at once (its body follows chunked, message by message)
     * and counts the response now, long before the exchange ends.
     */
    public static void startStream(HttpServletRequest request, HttpServletResponse response, String contentType,
            Stats stats) throws IOException {
        response.setStatus(200);
        response.setContentType(contentType);
        response.flushBuffer();
        StatsValve.headerSent(request, stats);
    }

    public static void error(HttpServletResponse response, ApiException error) throws IOException {
        if (response.isCommitted()) {
            return;
        }
        response.reset();
        if (error.headerName() != null) {
            response.setHeader(error.headerName(), error.headerValue());
        }
        send(response, error.status(), Json.CONTENT_TYPE, error.body());
    }
}
