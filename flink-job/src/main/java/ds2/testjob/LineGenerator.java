package ds2.testjob;

import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.metrics.Gauge;

/**
 * Turns the source's sequence number into a line of {@code wordsPerLine} keys ("k123 k9876"),
 * spread evenly over {@code keys} distinct keys. Registers the gauge {@code scheduledRate}: the
 * records per second this subtask is asked to produce now.
 */
public final class LineGenerator implements GeneratorFunction<Long, String> {
    private static final long serialVersionUID = 1L;

    private final int keys;
    private final int wordsPerLine;
    private final RateSchedule schedule;
    private final long scheduleStartMs;
    private final int sourceParallelism;

    public LineGenerator(
            int keys, int wordsPerLine, RateSchedule schedule, long scheduleStartMs, int sourceParallelism) {
        this.keys = keys;
        this.wordsPerLine = wordsPerLine;
        this.schedule = schedule;
        this.scheduleStartMs = scheduleStartMs;
        this.sourceParallelism = sourceParallelism;
    }

    @Override
    public void open(SourceReaderContext readerContext) {
        readerContext
                .metricGroup()
                .gauge(
                        "scheduledRate",
                        (Gauge<Double>)
                                () ->
                                        ScheduledRateLimiterStrategy.subtaskRate(
                                                schedule, scheduleStartMs, sourceParallelism));
    }

    @Override
    public String map(Long seq) {
        StringBuilder b = new StringBuilder(8 * wordsPerLine);
        long s = seq * wordsPerLine;
        for (int i = 0; i < wordsPerLine; i++) {
            if (i > 0) {
                b.append(' ');
            }
            b.append('k').append(keyOf(s + i, keys));
        }
        return b.toString();
    }

    /** A well-mixed key in [0, keys) for a sequence number. */
    static int keyOf(long n, int keys) {
        long z = n + 0x9E3779B97F4A7C15L; // splitmix64 finalizer
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        z = z ^ (z >>> 31);
        return (int) Math.floorMod(z, (long) keys);
    }
}
