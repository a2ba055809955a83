package serverlab.tomcat;

import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Map;
import serverlab.core.ControlApi;
import serverlab.core.Endpoint;
import serverlab.core.SseRequest;
import serverlab.core.SseStream;

/**
 * Base of the per-model {@code GET /sse} servlets (spec §10): the query and
 * {@code Last-Event-ID} are checked here (a 400 before any stream starts), how the stream
 * waits between its messages is the model's.
 */
public abstract class SseServlet extends SubscriberServlet {
    private static final long serialVersionUID = 1L;

    protected SseServlet(ControlApi control) {
        super(Endpoint.SSE, control);
    }

    @Override
    protected final void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        SseRequest sse = SseRequest.parse(request.getQueryString());
        Map<String, Long> lastEventId = SseStream.parseLastEventId(request.getHeader("Last-Event-ID"));
        stream(request, response, sse, lastEventId);
    }

    /** Runs the stream: register, write its opening, then its messages until it ends. */
    protected abstract void stream(HttpServletRequest request, HttpServletResponse response, SseRequest sse,
            Map<String, Long> lastEventId) throws IOException;

    /** The stream's header section, sent at once. */
    protected void startStream(HttpServletRequest request, HttpServletResponse response) throws IOException {
        response.setHeader("Cache-Control", "no-cache");
        startStream(request, response, SseStream.CONTENT_TYPE);
    }
}
