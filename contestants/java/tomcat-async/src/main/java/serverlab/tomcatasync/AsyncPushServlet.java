package serverlab.tomcatasync;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.ControlApi;
import serverlab.core.PushSpec;
import serverlab.tomcat.PushServlet;

/**
 * {@code POST /push} with the Servlet 3 async API (seed 004's Tomcat 7): the request is put in
 * async mode and its thread returns to the pool; an {@link AsyncRequestMonitor} answers it
 * when an emitter delivers or the container's async timeout fires.
 */
public final class AsyncPushServlet extends PushServlet {
    private static final long serialVersionUID = 1L;

    public AsyncPushServlet(ControlApi control) {
        super(control);
    }

    @Override
    protected void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        PushSpec spec = readSpec(request);
        AsyncContext async = request.startAsync();
        // 0 disables the container's timeout: a comet stream without duration_ms stays open.
        async.setTimeout(spec.durationMs() == null ? 0 : spec.durationMs());
        if (!spec.longPoll()) {
            startStream(request, response);
        }
        AsyncRequestMonitor monitor = new AsyncRequestMonitor(async, manager, spec.longPoll());
        async.addListener(monitor);
        monitor.register(spec);
    }
}
