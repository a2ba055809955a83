package serverlab.tomcatblocking;

import jakarta.servlet.ServletOutputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import serverlab.core.ControlApi;
import serverlab.core.Delivery;
import serverlab.core.PushSpec;
import serverlab.core.Subscriber;
import serverlab.tomcat.PushServlet;
import serverlab.tomcat.Responses;

/**
 * {@code POST /push} in the thread-per-request model: the request thread registers, then
 * blocks on its own inbox until an emitter hands it a delivery or its time is up. A waiting
 * poll or stream holds one thread for its whole life, as Tomcat 6 did in seed 004. That thread
 * makes each delivery (its {@code sent}) right before it writes and flushes it (spec §6).
 */
public final class BlockingPushServlet extends PushServlet {
    private static final long serialVersionUID = 1L;

    public BlockingPushServlet(ControlApi control) {
        super(control);
    }

    @Override
    protected void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        PushSpec spec = readSpec(request);
        BlockingQueue<Delivery> inbox = new LinkedBlockingQueue<>();
        Subscriber push = manager.register(spec, inbox::offer);
        try {
            if (spec.longPoll()) {
                Responses.jsonNow(response, awaitAnswer(push, inbox));
            } else {
                stream(push, inbox, request, response);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("server stopping");
        } finally {
            manager.abandon(push); // a no-op when answered; drops it when the client went away
        }
    }

    private byte[] awaitAnswer(Subscriber push, BlockingQueue<Delivery> inbox) throws InterruptedException {
        Delivery delivery = inbox.poll(push.spec().durationMs(), TimeUnit.MILLISECONDS);
        if (delivery != null) {
            return delivery.body();
        }
        byte[] answer = manager.timeout(push);
        // null: an emitter claimed this poll just as it timed out, and its delivery is on the way.
        return answer != null ? answer : inbox.take().body();
    }

    private void stream(Subscriber push, BlockingQueue<Delivery> inbox, HttpServletRequest request,
            HttpServletResponse response)
            throws IOException, InterruptedException {
        startStream(request, response);
        ServletOutputStream out = response.getOutputStream();
        Long durationMs = push.spec().durationMs();
        long deadline = durationMs == null ? 0 : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(durationMs);
        while (true) {
            Delivery delivery = durationMs == null
                    ? inbox.take()
                    : inbox.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (delivery == null) {
                byte[] last = manager.endStream(push);
                if (last != null) {
                    writeLine(out, last);
                }
                return;
            }
            writeLine(out, delivery.body());
        }
    }

    private static void writeLine(ServletOutputStream out, byte[] line) throws IOException {
        out.write(line);
        out.flush();
    }
}
