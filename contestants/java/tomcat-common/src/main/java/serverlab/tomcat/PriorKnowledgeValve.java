package serverlab.tomcat;

import jakarta.servlet.ServletException;
import java.io.IOException;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArraySet;
import org.apache.catalina.connector.Connector;
import org.apache.catalina.connector.Request;
import org.apache.catalina.connector.Response;
import org.apache.catalina.valves.ValveBase;
import org.apache.coyote.ActionCode;

/**
 * Spec §14: the h2c port speaks HTTP/2 only. Tomcat's connector takes a client's HTTP/2
 * preface there, but parses anything else as HTTP/1.1; such a request is a connection error
 * (RFC 9113 §3.4), so it is closed here without a byte of answer, before anything counts it.
 */
final class PriorKnowledgeValve extends ValveBase {
    private final Set<Connector> h2cOnly = new CopyOnWriteArraySet<>();

    PriorKnowledgeValve() {
        super(true);
    }

    /** A connector that serves HTTP/2 with prior knowledge and nothing else. */
    void add(Connector connector) {
        h2cOnly.add(connector);
    }

    @Override
    public void invoke(Request request, Response response) throws IOException, ServletException {
        if (!h2cOnly.contains(request.getConnector()) || "HTTP/2.0".equals(request.getProtocol())) {
            getNext().invoke(request, response);
            return;
        }
        // Committed as if sent, so that finishing the response writes no header section;
        // CLOSE_NOW swallows the rest and closes the connection.
        response.getCoyoteResponse().setCommitted(true);
        response.getCoyoteResponse().action(ActionCode.CLOSE_NOW, null);
    }
}
