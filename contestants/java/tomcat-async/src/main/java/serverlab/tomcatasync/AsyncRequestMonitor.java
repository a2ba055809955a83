package serverlab.tomcatasync;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import serverlab.core.Delivery;
import serverlab.core.PushSink;
import serverlab.core.PushSpec;
import serverlab.core.RequestManager;
import serverlab.core.Subscriber;
import serverlab.tomcat.Responses;

/**
 * One async push request, named after seed 004's class: an {@link AsyncListener} for the
 * container's timeout, error and completion, and the {@link PushSink} emitters write through.
 * Emitter threads and container threads may both answer, so writes are serialized on this.
 */
final class AsyncRequestMonitor implements AsyncListener, PushSink {
    private final AsyncContext async;
    private final RequestManager manager;
    private final boolean longPoll;
    private volatile Subscriber request;
    /** The response is complete: nothing may be written any more. Guarded by this. */
    private boolean done;

    AsyncRequestMonitor(AsyncContext async, RequestManager manager, boolean longPoll) {
        this.async = async;
        this.manager = manager;
        this.longPoll = longPoll;
    }

    void register(PushSpec spec) {
        request = manager.register(spec, this);
    }

    @Override
    public synchronized boolean deliver(Delivery delivery) {
        if (done) {
            return false;
        }
        try {
            write(delivery.body()); // made on this thread, right before its write (spec §6)
        } catch (IOException | IllegalStateException clientGone) {
            finish();
            return false;
        }
        if (longPoll) {
            finish();
        }
        return true;
    }

    private void write(byte[] body) throws IOException {
        HttpServletResponse response = (HttpServletResponse) async.getResponse();
        if (longPoll) {
            Responses.jsonNow(response, body);
        } else {
            response.getOutputStream().write(body);
            response.getOutputStream().flush();
        }
    }

    /** Ends the response; wakes a timeout waiting for a delivery that won the race. */
    private void finish() {
        done = true;
        async.complete();
        notifyAll();
    }

    @Override
    public void onTimeout(AsyncEvent event) throws IOException {
        byte[] answer = manager.timeout(request);
        synchronized (this) {
            if (answer == null) {
                // An emitter claimed this request as it timed out; the container would end the
                // response with an error unless it is completed before we return.
                awaitDone();
                return;
            }
            if (!done) {
                try {
                    write(answer);
                } finally {
                    finish();
                }
            }
        }
    }

    private void awaitDone() {
        while (!done) {
            try {
                wait();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    @Override
    public void onError(AsyncEvent event) {
        manager.abandon(request);
        synchronized (this) {
            if (!done) {
                finish();
            }
        }
    }

    @Override
    public void onComplete(AsyncEvent event) {
        manager.abandon(request); // a no-op when answered; drops a stream whose client left
    }

    @Override
    public void onStartAsync(AsyncEvent event) {
    }
}
