package ds2.testjob;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A source with a fixed number of partitions that owes what it could not emit, like a Kafka topic
 * read by a consumer that falls behind: each partition is owed rate / partitions records per second
 * by the {@link RateSchedule}. With {@code backlog} on, records not emitted while the job was
 * back-pressured or stopped accumulate and are emitted as fast as the job takes them; with it off,
 * a partition that falls more than 100 ms behind drops what it owes beyond that (the old test job's
 * behaviour), as it always does before the schedule's start. Each reader reports FLIP-33 {@code pendingRecords} (what its partitions owe now) and
 * {@code scheduledRate}. A subtask without a partition idles, so the partitions cap the source's
 * useful parallelism.
 */
public final class PartitionedSource implements Source<String, PartitionSplit, List<PartitionSplit>> {
    private static final long serialVersionUID = 1L;

    final int partitions;
    final boolean backlog;
    final RateSchedule schedule;
    final long scheduleStartMs;
    final int keys;
    final int wordsPerLine;
    final double skew;

    public PartitionedSource(
            int partitions,
            boolean backlog,
            RateSchedule schedule,
            long scheduleStartMs,
            int keys,
            int wordsPerLine,
            double skew) {
        if (partitions < 1) {
            throw new IllegalArgumentException("--partitions must be >= 1");
        }
        this.partitions = partitions;
        this.backlog = backlog;
        this.schedule = schedule;
        this.scheduleStartMs = scheduleStartMs;
        this.keys = keys;
        this.wordsPerLine = wordsPerLine;
        this.skew = skew;
    }

    /** Records one partition is owed from the schedule's start until now (see RateSchedule#cumulative). */
    double owedPerPartition(long nowMs) {
        return schedule.cumulative(nowMs - scheduleStartMs) / partitions;
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SourceReader<String, PartitionSplit> createReader(SourceReaderContext context) {
        return new PartitionReader(this, context);
    }

    @Override
    public SplitEnumerator<PartitionSplit, List<PartitionSplit>> createEnumerator(
            SplitEnumeratorContext<PartitionSplit> context) {
        double base = owedPerPartition(System.currentTimeMillis());
        List<PartitionSplit> all = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            all.add(new PartitionSplit(p, base, 0));
        }
        return new Enumerator(context, all);
    }

    @Override
    public SplitEnumerator<PartitionSplit, List<PartitionSplit>> restoreEnumerator(
            SplitEnumeratorContext<PartitionSplit> context, List<PartitionSplit> unassigned) {
        return new Enumerator(context, unassigned);
    }

    @Override
    public SimpleVersionedSerializer<PartitionSplit> getSplitSerializer() {
        return new PartitionSplit.Serializer();
    }

    @Override
    public SimpleVersionedSerializer<List<PartitionSplit>> getEnumeratorCheckpointSerializer() {
        return new UnassignedSerializer();
    }

    /**
     * Hands partition p to reader p mod parallelism as readers register; splits that come back
     * (a failed reader) are handed out again. Its checkpoint is the splits not yet assigned: the
     * assigned ones are in their readers' state.
     */
    static final class Enumerator implements SplitEnumerator<PartitionSplit, List<PartitionSplit>> {
        private final SplitEnumeratorContext<PartitionSplit> context;
        private final Map<Integer, PartitionSplit> unassigned = new TreeMap<>();

        Enumerator(SplitEnumeratorContext<PartitionSplit> context, List<PartitionSplit> splits) {
            this.context = context;
            for (PartitionSplit s : splits) {
                unassigned.put(s.partition, s);
            }
        }

        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtaskId, String requesterHostname) {}

        @Override
        public void addSplitsBack(List<PartitionSplit> splits, int subtaskId) {
            for (PartitionSplit s : splits) {
                unassigned.put(s.partition, s);
            }
            if (context.registeredReaders().containsKey(subtaskId)) {
                addReader(subtaskId);
            }
        }

        @Override
        public void addReader(int subtaskId) {
            int readers = context.currentParallelism();
            Iterator<PartitionSplit> it = unassigned.values().iterator();
            while (it.hasNext()) {
                PartitionSplit s = it.next();
                if (s.partition % readers == subtaskId) {
                    context.assignSplit(s, subtaskId);
                    it.remove();
                }
            }
        }

        @Override
        public List<PartitionSplit> snapshotState(long checkpointId) {
            List<PartitionSplit> out = new ArrayList<>();
            for (PartitionSplit s : unassigned.values()) {
                out.add(s.copy());
            }
            return out;
        }

        @Override
        public void close() {}
    }

    /** The enumerator's checkpoint: a count, then each split as the split serializer writes it. */
    static final class UnassignedSerializer implements SimpleVersionedSerializer<List<PartitionSplit>> {
        private final PartitionSplit.Serializer splits = new PartitionSplit.Serializer();

        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(List<PartitionSplit> list) throws IOException {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                out.writeInt(list.size());
                for (PartitionSplit s : list) {
                    byte[] b = splits.serialize(s);
                    out.writeInt(b.length);
                    out.write(b);
                }
            }
            return bytes.toByteArray();
        }

        @Override
        public List<PartitionSplit> deserialize(int version, byte[] serialized) throws IOException {
            if (version != 1) {
                throw new IOException("unknown enumerator checkpoint version " + version);
            }
            List<PartitionSplit> out = new ArrayList<>();
            try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
                int n = in.readInt();
                for (int i = 0; i < n; i++) {
                    byte[] b = new byte[in.readInt()];
                    in.readFully(b);
                    out.add(splits.deserialize(splits.getVersion(), b));
                }
            }
            return out;
        }
    }
}
