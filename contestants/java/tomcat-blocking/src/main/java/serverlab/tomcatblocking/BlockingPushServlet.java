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
import serverlab.core.PushSpec;
import serverlab.core.Subscriber;
import serverlab.tomcat.PushServlet;
import serverlab.tomcat.Responses;

/**
 * {@code POST /push} in the thread-per-request model: the request thread registers, then
 * blocks on its own inbox until an emitter hands it a delivery or its time is up. A waiting
 * poll or stream holds one thread for its whole life, as Tomcat 6 did in seed 004.
 */
public final class BlockingPushServlet extends PushServlet {
    private static final long serialVersionUID = 1L;

    public BlockingPushServlet(ControlApi control) {
        super(control);
    }

    @Override
    protected void handle(HttpServletRequest request, HttpServletResponse response) throws IOException {
        PushSpec spec = readSpec(request);
        BlockingQueue<byte[]> inbox = new LinkedBlockingQueue<>();
        Subscriber push = manager.register(spec, (event, seq, body) -> inbox.offer(body));
        try {
            if (spec.longPoll()) {
                Responses.json(response, awaitAnswer(push, inbox));
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

    private byte[] awaitAnswer(Subscriber push, BlockingQueue<byte[]> inbox) throws InterruptedException {
        byte[] answer = inbox.poll(push.spec().durationMs(), TimeUnit.MILLISECONDS);
        if (answer != null) {
            return answer;
        }
        answer = manager.timeout(push);
        // null: an emitter claimed this poll just as it timed out, and its delivery is on the way.
        return answer != null ? answer : inbox.take();
    }

    private void stream(Subscriber push, BlockingQueue<byte[]> inbox, HttpServletRequest request,
            HttpServletResponse response)
            throws IOException, InterruptedException {
        startStream(request, response);
        ServletOutputStream out = response.getOutputStream();
        Long durationMs = push.spec().durationMs();
        long deadline = durationMs == null ? 0 : System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(durationMs);
        while (true) {
            byte[] line = durationMs == null
                    ? inbox.take()
                    : inbox.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (line == null) {
                line = manager.endStream(push);
                if (line != null) {
                    writeLine(out, line);
                }
                return;
            }
            writeLine(out, line);
        }
    }

    private static void writeLine(ServletOutputStream out, byte[] line) throws IOException {
        out.write(line);
        out.flush();
    }
}
