package serverlab.core;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.atomic.AtomicLong;

/** A timer pool of daemon threads, one per CPU (at least two), that forgets cancelled tasks. */
public final class DaemonScheduler {
    private DaemonScheduler() {
    }

    public static ScheduledExecutorService create(String threadPrefix) {
        AtomicLong threadNumber = new AtomicLong();
        ScheduledThreadPoolExecutor pool = new ScheduledThreadPoolExecutor(
                Math.max(2, Runtime.getRuntime().availableProcessors()), task -> {
                    Thread thread = new Thread(task, threadPrefix + "-" + threadNumber.incrementAndGet());
                    thread.setDaemon(true);
                    return thread;
                });
        pool.setRemoveOnCancelPolicy(true);
        return pool;
    }
}
