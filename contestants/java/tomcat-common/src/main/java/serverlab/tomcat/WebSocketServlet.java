package serverlab.tomcat;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import jakarta.websocket.DeploymentException;
import jakarta.websocket.Extension;
import jakarta.websocket.server.ServerContainer;
import jakarta.websocket.server.ServerEndpointConfig;
import java.io.IOException;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.tomcat.websocket.server.WsServerContainer;
import serverlab.core.ControlApi;
import serverlab.core.Endpoint;
import serverlab.core.WebSocketHandshake;

/**
 * {@code GET /ws} (spec §11) on Tomcat's own JSR 356 implementation, the same for every
 * Tomcat contestant: the handshake is checked here first, so that a refusal gets the spec's
 * status and JSON error, then the standard {@code upgradeHttpToWebSocket} hands the
 * connection to a {@link WebSocketEndpoint}.
 */
final class WebSocketServlet extends EndpointServlet {
    private static final long serialVersionUID = 1L;
    /** How often (seconds) the container looks for sessions whose close went unanswered. */
    private static final int CLOSE_CHECK_PERIOD_S = 1;
    private final transient ServerEndpointConfig config;
    private transient ServerContainer container;

    WebSocketServlet(ControlApi control) {
        super(Endpoint.WEBSOCKET);
        this.config = ServerEndpointConfig.Builder.create(WebSocketEndpoint.class, Endpoint.WEBSOCKET.path())
                .configurator(new Configurator(control)).build();
    }

    @Override
    public void init() throws ServletException {
        container = (ServerContainer) getServletContext().getAttribute(ServerContainer.class.getName());
        if (container == null) {
            throw new ServletException("no WebSocket container: WsSci did not run");
        }
        ((WsServerContainer) container).setProcessPeriod(CLOSE_CHECK_PERIOD_S);
    }

    @Override
    protected void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        WebSocketHandshake.check(name -> Collections.list(request.getHeaders(name)));
        try {
            container.upgradeHttpToWebSocket(request, response, config, Map.of());
        } catch (DeploymentException e) {
            throw new IOException("websocket upgrade failed", e);
        }
    }

    /** One endpoint per connection; every extension declined and no subprotocol selected. */
    private static final class Configurator extends ServerEndpointConfig.Configurator {
        private final ControlApi control;

        Configurator(ControlApi control) {
            this.control = control;
        }

        @Override
        public <T> T getEndpointInstance(Class<T> endpointClass) {
            return endpointClass.cast(new WebSocketEndpoint(control));
        }

        @Override
        public List<Extension> getNegotiatedExtensions(List<Extension> installed, List<Extension> requested) {
            // Compression would make message sizes and CPU figures incomparable (spec §11).
            return List.of();
        }

        @Override
        public String getNegotiatedSubprotocol(List<String> supported, List<String> requested) {
            return "";
        }

        @Override
        public boolean checkOrigin(String originHeaderValue) {
            return true;
        }
    }
}
