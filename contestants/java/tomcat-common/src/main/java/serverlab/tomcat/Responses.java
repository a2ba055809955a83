package serverlab.tomcat;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.ApiException;
import serverlab.core.Json;

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
     * A long poll's answer, written to the socket now (spec §6: its {@code sent} is the moment
     * of this write), not when the request ends and the container flushes the buffer.
     */
    public static void jsonNow(HttpServletResponse response, byte[] body) throws IOException {
        json(response, body);
        response.flushBuffer();
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
