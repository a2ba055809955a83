package serverlab.tomcat;

import io.grpc.servlet.jakarta.ServletAdapter;
import io.grpc.servlet.jakarta.ServletServerBuilder;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.http.HttpFilter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.concurrent.Executor;
import serverlab.core.ControlApi;
import serverlab.core.Stats;
import serverlab.grpc.LabService;

/**
 * Spec §16 on Tomcat: every HTTP/2 {@code POST} with a gRPC content-type, whatever its path,
 * goes to grpc-java's own servlet transport (grpc-servlet-jakarta's {@link ServletAdapter},
 * an async servlet: a call holds no container thread while it waits), so an unknown method
 * or service is grpc-java's UNIMPLEMENTED rather than the container's 404. Everything else,
 * and every HTTP/1.1 request whatever it carries, goes on to the usual servlets.
 */
final class GrpcFilter extends HttpFilter {
    private static final long serialVersionUID = 1L;
    private static final String HTTP2 = "HTTP/2.0";

    private final transient ServletAdapter adapter;
    private final transient Stats stats;

    /** {@code calls} runs grpc-java's handlers and call listeners (ServerBuilder.executor). */
    GrpcFilter(ControlApi control, Executor calls) {
        this.stats = control.counters();
        this.adapter = new ServletServerBuilder().addService(new LabService(control)).executor(calls)
                .buildServletAdapter();
    }

    @Override
    protected void doFilter(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
            throws IOException, ServletException {
        if (HTTP2.equals(request.getProtocol()) && "POST".equals(request.getMethod()) && isGrpc(request)) {
            stats.grpcCall();
            adapter.doPost(request, new StatusInTrailers(response));
        } else {
            chain.doFilter(request, response);
        }
    }

    /** {@code application/grpc} or {@code application/grpc+<codec>} (§16). */
    private static boolean isGrpc(ServletRequest request) {
        String type = request.getContentType();
        return type != null && (type.equals("application/grpc") || type.startsWith("application/grpc+")
                || type.startsWith("application/grpc;"));
    }

    @Override
    public void destroy() {
        adapter.destroy();
    }
}
