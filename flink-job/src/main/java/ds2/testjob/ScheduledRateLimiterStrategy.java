package ds2.testjob;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiter;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;

/**
 * Rate limiting that follows a {@link RateSchedule} by wall-clock time elapsed since a fixed epoch
 * instant, so a job restored from a savepoint continues the schedule where it was (pass the original
 * start) instead of starting it over. Each of the source's subtasks gets rate / parallelism.
 *
 * <p>Permits are handed out without waiting while the subtask is behind schedule, so late wake-ups
 * on a busy machine cost no rate (at most {@link #MAX_CREDIT_NS} of credit: no long catch-up burst
 * after back-pressure); when it is ahead it waits at least {@link #MIN_WAIT_NS}, so a subtask wakes
 * up about 1,000 times a second instead of once per record.
 */
public final class ScheduledRateLimiterStrategy<S extends SourceSplit> implements RateLimiterStrategy<S> {
    private static final long serialVersionUID = 1L;

    static final long MIN_WAIT_NS = 1_000_000L;
    static final long MAX_CREDIT_NS = 100_000_000L;
    /** Re-check interval while the schedule says 0 records per second. */
    static final long PAUSED_RECHECK_NS = 100_000_000L;

    private final RateSchedule schedule;
    private final long startEpochMs;

    public ScheduledRateLimiterStrategy(RateSchedule schedule, long startEpochMs) {
        this.schedule = schedule;
        this.startEpochMs = startEpochMs;
    }

    @Override
    public RateLimiter<S> createRateLimiter(int parallelism) {
        return new Limiter<>(schedule, startEpochMs, Math.max(1, parallelism));
    }

    /** Records per second this subtask should produce right now. */
    static double subtaskRate(RateSchedule schedule, long startEpochMs, int parallelism) {
        return schedule.rateAt(System.currentTimeMillis() - startEpochMs) / parallelism;
    }

    private static final class Limiter<S extends SourceSplit> implements RateLimiter<S> {
        private final RateSchedule schedule;
        private final long startEpochMs;
        private final int parallelism;
        private long nextPermitNs = System.nanoTime();

        Limiter(RateSchedule schedule, long startEpochMs, int parallelism) {
            this.schedule = schedule;
            this.startEpochMs = startEpochMs;
            this.parallelism = parallelism;
        }

        @Override
        public CompletionStage<Void> acquire(int numberOfEvents) {
            long now = System.nanoTime();
            double rate = subtaskRate(schedule, startEpochMs, parallelism);
            if (rate <= 0) {
                nextPermitNs = now;
                return after(PAUSED_RECHECK_NS).thenCompose(v -> acquire(numberOfEvents));
            }
            if (nextPermitNs < now - MAX_CREDIT_NS) {
                nextPermitNs = now - MAX_CREDIT_NS;
            }
            long permitAt = nextPermitNs;
            nextPermitNs += (long) (numberOfEvents * 1e9 / rate);
            long wait = permitAt - now;
            if (wait <= 0) {
                return CompletableFuture.completedFuture(null);
            }
            return after(Math.max(wait, MIN_WAIT_NS));
        }

        private static CompletableFuture<Void> after(long nanos) {
            // The JDK's shared delayer thread: no thread of our own to leak when the job ends.
            Executor delayed = CompletableFuture.delayedExecutor(nanos, TimeUnit.NANOSECONDS);
            return CompletableFuture.runAsync(() -> {}, delayed);
        }
    }
}
