package serverlab.tomcat;

import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.ServletException;
import java.io.IOException;
import org.apache.catalina.connector.Request;
import org.apache.catalina.connector.Response;
import org.apache.catalina.valves.ValveBase;
import serverlab.core.ControlApi;
import serverlab.core.Stats;

/**
 * Counts requests and responses for {@code /stats}, and writes the per-request log line while
 * logging is on. Sits first in the engine's pipeline so it sees every request that reaches
 * the container, including those the error-report valve answers.
 */
final class StatsValve extends ValveBase {
    /** Marks a response already counted when its header section went out (a comet stream). */
    private static final String COUNTED = StatsValve.class.getName() + ".counted";

    private final ControlApi control;
    private final Stats stats;

    StatsValve(ControlApi control) {
        super(true);
        this.control = control;
        this.stats = control.counters();
    }

    @Override
    public void invoke(Request request, Response response) throws IOException, ServletException {
        stats.requestRead();
        try {
            getNext().invoke(request, response);
        } finally {
            if (request.isAsync()) {
                request.getAsyncContextInternal().addListener(new CompletionListener(request, response));
            } else {
                responded(request, response);
            }
        }
    }

    /** Counts a response whose header section is sent now, long before the exchange ends. */
    static void headerSent(jakarta.servlet.ServletRequest request, Stats stats) {
        request.setAttribute(COUNTED, Boolean.TRUE);
        stats.responseSent();
    }

    private void responded(Request request, Response response) {
        if (request.getAttribute(COUNTED) == null) {
            stats.responseSent();
        }
        if (control.logging()) {
            System.err.println(request.getMethod() + " " + request.getRequestURI() + " " + response.getStatus());
        }
    }

    /** An async request responds when it completes, long after the valve returned. */
    private final class CompletionListener implements AsyncListener {
        private final Request request;
        private final Response response;

        CompletionListener(Request request, Response response) {
            this.request = request;
            this.response = response;
        }

        @Override
        public void onComplete(AsyncEvent event) {
            responded(request, response);
        }

        @Override
        public void onTimeout(AsyncEvent event) {
        }

        @Override
        public void onError(AsyncEvent event) {
        }

        @Override
        public void onStartAsync(AsyncEvent event) {
        }
    }
}
