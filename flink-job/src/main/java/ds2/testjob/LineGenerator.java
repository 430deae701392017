package ds2.testjob;

import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.metrics.Gauge;

/**
 * Turns the source's sequence number into a line of {@code wordsPerLine} keys ("k123 k9876"),
 * spread evenly over {@code keys} distinct keys, except that a fraction {@code skew} of all keys
 * drawn is the one hot key k0 (its Count subtask then caps the job's useful parallelism). Registers the gauge {@code scheduledRate}: the
 * records per second this subtask is asked to produce now.
 */
public final class LineGenerator implements GeneratorFunction<Long, String> {
    private static final long serialVersionUID = 1L;

    private final int keys;
    private final int wordsPerLine;
    private final RateSchedule schedule;
    private final long scheduleStartMs;
    private final int sourceParallelism;
    private final double skew;

    public LineGenerator(
            int keys,
            int wordsPerLine,
            double skew,
            RateSchedule schedule,
            long scheduleStartMs,
            int sourceParallelism) {
        this.keys = keys;
        this.skew = skew;
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
        return line(seq, keys, wordsPerLine, skew);
    }

    /** The line for sequence number {@code seq}: {@code words} keys separated by blanks. */
    static String line(long seq, int keys, int words, double skew) {
        StringBuilder b = new StringBuilder(8 * words);
        long s = seq * words;
        for (int i = 0; i < words; i++) {
            if (i > 0) {
                b.append(' ');
            }
            b.append('k').append(keyOf(s + i, keys, skew));
        }
        return b.toString();
    }

    /** A well-mixed key in [0, keys) for a sequence number; with probability {@code skew} key 0. */
    static int keyOf(long n, int keys, double skew) {
        long z = n + 0x9E3779B97F4A7C15L; // splitmix64 finalizer
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        z = z ^ (z >>> 31);
        if (skew > 0 && (z >>> 11) * 0x1.0p-53 < skew) {
            return 0;
        }
        return (int) Math.floorMod(z, (long) keys);
    }
}
