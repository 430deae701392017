package ds2.testjob;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * One "partition" of the {@link PartitionedSource}, like a Kafka partition: it owes its share of the
 * scheduled records from the moment it was created ({@code baseRecords}, the schedule's cumulative
 * count then, divided by the partitions) and remembers how many it has emitted. Both survive a
 * savepoint, so records not emitted while the job was stopped are owed after the restart.
 */
public final class PartitionSplit implements SourceSplit {
    final int partition;
    final double baseRecords;
    long emitted;

    PartitionSplit(int partition, double baseRecords, long emitted) {
        this.partition = partition;
        this.baseRecords = baseRecords;
        this.emitted = emitted;
    }

    @Override
    public String splitId() {
        return "partition-" + partition;
    }

    PartitionSplit copy() {
        return new PartitionSplit(partition, baseRecords, emitted);
    }

    /** Writes a split as (partition, base, emitted). */
    static final class Serializer implements SimpleVersionedSerializer<PartitionSplit> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(PartitionSplit split) throws IOException {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream(20);
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                out.writeInt(split.partition);
                out.writeDouble(split.baseRecords);
                out.writeLong(split.emitted);
            }
            return bytes.toByteArray();
        }

        @Override
        public PartitionSplit deserialize(int version, byte[] serialized) throws IOException {
            if (version != 1) {
                throw new IOException("unknown partition split version " + version);
            }
            try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
                return new PartitionSplit(in.readInt(), in.readDouble(), in.readLong());
            }
        }
    }
}
