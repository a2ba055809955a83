package serverlab.tomcatasync;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ScheduledExecutorService;
import serverlab.core.ControlApi;
import serverlab.core.DaemonScheduler;
import serverlab.core.SseRequest;
import serverlab.tomcat.SseServlet;

/**
 * {@code GET /sse} with the Servlet 3 async API: the request goes async and its thread returns
 * to the pool; an {@link AsyncSseStream} writes deliveries from emitter threads, heartbeats and
 * the end of the stream from a timer, as seed 004's Tomcat 7 wrote long-poll answers.
 */
public final class AsyncSseServlet extends SseServlet {
    private static final long serialVersionUID = 1L;
    private final transient ScheduledExecutorService timers;

    public AsyncSseServlet(ControlApi control) {
        super(control);
        this.timers = DaemonScheduler.create("sse-timer");
    }

    @Override
    protected void stream(HttpServletRequest request, HttpServletResponse response, SseRequest sse,
            Map<String, Long> lastEventId) throws IOException {
        AsyncContext async = request.startAsync();
        async.setTimeout(0); // the stream's own timer ends it; Tomcat checks its timeouts once a second
        startStream(request, response);
        AsyncSseStream stream = new AsyncSseStream(async, manager, stats, timers);
        async.addListener(stream);
        stream.start(sse, lastEventId);
    }
}
