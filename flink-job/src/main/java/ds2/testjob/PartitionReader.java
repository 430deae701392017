package ds2.testjob;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.metrics.Gauge;

/**
 * Reads the partitions assigned to one source subtask: emits what they owe (see
 * {@link PartitionedSource}), round-robin, one record per poll, and waits a millisecond when all are
 * caught up. Record {@code n} of partition {@code p} is line {@code n * partitions + p} of the test
 * job's key sequence.
 */
final class PartitionReader implements SourceReader<String, PartitionSplit> {
    /** With backlog off, a partition may fall this far behind before it drops what it owes. */
    static final long MAX_CREDIT_MS = 100;
    static final long IDLE_WAIT_NS = 1_000_000L;
    /** How often the owed counts are recomputed while records are owed. */
    static final long REFRESH_NS = 1_000_000L;

    private final PartitionedSource source;
    private final List<PartitionSplit> splits = new ArrayList<>();
    private double[] owed = new double[0];
    private long owedAtNs;
    private int next;

    PartitionReader(PartitionedSource source, SourceReaderContext context) {
        this.source = source;
        context.metricGroup().setPendingRecordsGauge((Gauge<Long>) this::pendingRecords);
        context.metricGroup().gauge("scheduledRate", (Gauge<Double>) this::scheduledRate);
        context.metricGroup().gauge("partitions", (Gauge<Integer>) this::assignedPartitions);
    }

    @Override
    public void start() {}

    private synchronized int assignedPartitions() {
        return splits.size();
    }

    /** Records per second this subtask is asked to emit now: its partitions' share of the rate. */
    private synchronized double scheduledRate() {
        long elapsed = System.currentTimeMillis() - source.scheduleStartMs;
        return source.schedule.rateAt(elapsed) * splits.size() / source.partitions;
    }

    /** What this subtask's partitions owe now, in records (FLIP-33 pendingRecords). */
    private synchronized long pendingRecords() {
        double due = source.owedPerPartition(System.currentTimeMillis());
        long total = 0;
        for (PartitionSplit s : splits) {
            total += Math.max(0, (long) (due - s.baseRecords) - s.emitted);
        }
        return total;
    }

    /** Recomputes what each partition owes; with backlog off (or before the start) forgives what is older than the credit. */
    private void refreshOwed(long nowNs) {
        long nowMs = System.currentTimeMillis();
        double due = source.owedPerPartition(nowMs);
        double credit = source.owedPerPartition(nowMs) - source.owedPerPartition(nowMs - MAX_CREDIT_MS);
        if (owed.length != splits.size()) {
            owed = new double[splits.size()];
        }
        // Before the schedule's start (a job submitted early, waiting for its first epoch) nothing is
        // owed beyond the credit: the backlog counts from the start of the load, not from the submission.
        boolean forgive = !source.backlog || nowMs < source.scheduleStartMs;
        for (int i = 0; i < splits.size(); i++) {
            PartitionSplit s = splits.get(i);
            double pending = due - s.baseRecords - s.emitted;
            if (forgive && pending > credit) {
                s.emitted += (long) (pending - credit);
                pending = due - s.baseRecords - s.emitted;
            }
            owed[i] = pending;
        }
        owedAtNs = nowNs;
    }

    @Override
    public synchronized InputStatus pollNext(ReaderOutput<String> output) {
        int n = splits.size();
        if (n == 0) {
            return InputStatus.NOTHING_AVAILABLE;
        }
        long now = System.nanoTime();
        if (now - owedAtNs > REFRESH_NS || owed.length != n) {
            refreshOwed(now);
        }
        for (int tried = 0; tried < n; tried++) {
            int i = next;
            next = (next + 1) % n;
            if (owed[i] >= 1) {
                PartitionSplit s = splits.get(i);
                long seq = s.emitted * source.partitions + s.partition;
                output.collect(LineGenerator.line(seq, source.keys, source.wordsPerLine, source.skew));
                s.emitted++;
                owed[i] -= 1;
                return InputStatus.MORE_AVAILABLE;
            }
        }
        refreshOwed(now);
        for (double o : owed) {
            if (o >= 1) {
                return InputStatus.MORE_AVAILABLE;
            }
        }
        return InputStatus.NOTHING_AVAILABLE;
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
        Executor delayed = CompletableFuture.delayedExecutor(IDLE_WAIT_NS, TimeUnit.NANOSECONDS);
        return CompletableFuture.runAsync(() -> {}, delayed);
    }

    @Override
    public synchronized List<PartitionSplit> snapshotState(long checkpointId) {
        List<PartitionSplit> out = new ArrayList<>();
        for (PartitionSplit s : splits) {
            out.add(s.copy());
        }
        return out;
    }

    @Override
    public synchronized void addSplits(List<PartitionSplit> added) {
        splits.addAll(added);
        owed = new double[0];
    }

    @Override
    public void notifyNoMoreSplits() {}

    @Override
    public void close() {}
}
