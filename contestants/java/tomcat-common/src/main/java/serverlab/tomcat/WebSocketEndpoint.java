package serverlab.tomcat;

import jakarta.websocket.CloseReason;
import jakarta.websocket.Endpoint;
import jakarta.websocket.EndpointConfig;
import jakarta.websocket.MessageHandler;
import jakarta.websocket.Session;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import serverlab.core.ControlApi;
import serverlab.core.Stats;
import serverlab.core.WebSocketSession;

/**
 * One WebSocket connection on Tomcat's JSR 356 implementation, which frames, answers pings,
 * checks UTF-8 (1007) and frames (1002) and answers a client's close with its code. Messages
 * go to the shared {@link WebSocketSession}; replies and deliveries are sent blocking, one at
 * a time, from whichever thread has them (a container thread, an emitter).
 */
public final class WebSocketEndpoint extends Endpoint implements WebSocketSession.Connection {
    /** Tomcat's session property: how long a close we sent waits for the client's answer. */
    private static final String CLOSE_TIMEOUT = "org.apache.tomcat.websocket.SESSION_CLOSE_TIMEOUT";
    private static final long CLOSE_TIMEOUT_MS = 500;

    private final ControlApi control;
    private final Stats stats;
    /**
     * One send at a time (Tomcat refuses concurrent ones). A lock, not a monitor: a virtual
     * thread blocked in a write under a monitor pins its carrier on JDKs before 24.
     */
    private final ReentrantLock sending = new ReentrantLock();
    private Session session;
    private WebSocketSession messages;

    WebSocketEndpoint(ControlApi control) {
        this.control = control;
        this.stats = control.counters();
    }

    @Override
    public void onOpen(Session opened, EndpointConfig config) {
        stats.webSocketOpened();
        session = opened;
        messages = new WebSocketSession(control, this);
        // Counted in characters: no message over 65,536 bytes has fewer than 65,536 of them,
        // so this bounds the buffer and onText checks the bytes.
        session.setMaxTextMessageBufferSize(WebSocketSession.MAX_MESSAGE);
        session.getUserProperties().put(CLOSE_TIMEOUT, CLOSE_TIMEOUT_MS);
        session.addMessageHandler(String.class, (MessageHandler.Whole<String>) this::onText);
        // Partial: the first part of a binary message of any size is enough to refuse it.
        session.addMessageHandler(ByteBuffer.class, (MessageHandler.Partial<ByteBuffer>) (part, last) -> {
            messages.onBinary();
        });
    }

    private void onText(String text) {
        if (utf8Length(text) > WebSocketSession.MAX_MESSAGE) {
            close(WebSocketSession.MESSAGE_TOO_BIG, "a message is at most 65536 bytes");
            return;
        }
        messages.onText(text);
    }

    @Override
    public void onClose(Session closed, CloseReason reason) {
        stats.webSocketClosed();
        messages.closed();
    }

    @Override
    public boolean send(Supplier<byte[]> message) {
        sending.lock();
        try {
            if (!session.isOpen()) {
                return false;
            }
            // Made here, once this thread may write: a delivery's `sent` is its write's moment.
            session.getBasicRemote().sendText(new String(message.get(), StandardCharsets.UTF_8));
            return true;
        } catch (IOException | IllegalStateException gone) {
            return false;
        } finally {
            sending.unlock();
        }
    }

    @Override
    public void close(int code, String reason) {
        sending.lock();
        try {
            session.close(new CloseReason(CloseReason.CloseCodes.getCloseCode(code), reason));
        } catch (IOException alreadyGone) {
            // Tomcat closes the connection itself when the close frame cannot be sent.
        } finally {
            sending.unlock();
        }
    }

    private static int utf8Length(String text) {
        int bytes = 0;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c < 0x80) {
                bytes++;
            } else if (c < 0x800) {
                bytes += 2;
            } else if (Character.isHighSurrogate(c)) {
                bytes += 4;
                i++; // valid UTF-8 decodes to whole surrogate pairs
            } else {
                bytes += 3;
            }
        }
        return bytes;
    }
}
