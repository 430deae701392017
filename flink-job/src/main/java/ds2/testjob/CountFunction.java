package ds2.testjob;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * A running count per key in keyed state (ValueState), paying a configurable per-record cost.
 * With {@code stateBytesPerKey} > 0 each key also holds that many bytes of payload, written once when
 * the key is first seen (incompressible bytes derived from the key): the job's state then grows to
 * distinct keys x bytes, for measuring what a rescale costs with large state.
 * Emits (key, count). Metrics of every subtask:
 *
 * <ul>
 *   <li>{@code firstCountSeen} (gauge): the count of the first record this subtask processed since it
 *       (re)started; 0 before any record. 1 on a fresh start, greater than 1 after a restore from a
 *       savepoint or checkpoint: proof that the keyed state survived a rescale;
 *   <li>{@code countedRecords} (counter): records counted by this subtask since it (re)started.
 * </ul>
 */
public final class CountFunction
        extends KeyedProcessFunction<Integer, Tuple2<Integer, Long>, Tuple2<Integer, Long>> {
    private static final long serialVersionUID = 1L;

    private final RecordCost cost;
    private final int stateBytesPerKey;
    private transient ValueState<Long> count;
    private transient ValueState<byte[]> payload;
    private transient Counter counted;
    private transient volatile long firstCountSeen;

    public CountFunction(RecordCost cost, int stateBytesPerKey) {
        this.cost = cost;
        this.stateBytesPerKey = stateBytesPerKey;
    }

    @Override
    public void open(OpenContext openContext) {
        count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        if (stateBytesPerKey > 0) {
            payload = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("payload", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
        }
        counted = getRuntimeContext().getMetricGroup().counter("countedRecords");
        getRuntimeContext().getMetricGroup().gauge("firstCountSeen", (Gauge<Long>) () -> firstCountSeen);
    }

    @Override
    public void processElement(Tuple2<Integer, Long> in, Context ctx, Collector<Tuple2<Integer, Long>> out)
            throws Exception {
        if (!cost.isFree()) {
            cost.apply();
        }
        Long before = count.value();
        if (before == null && payload != null) {
            payload.update(payloadOf(in.f0, stateBytesPerKey));
        }
        long now = (before == null ? 0L : before) + in.f1;
        count.update(now);
        if (firstCountSeen == 0) {
            firstCountSeen = now;
        }
        counted.inc();
        out.collect(Tuple2.of(in.f0, now));
    }

    /** {@code n} pseudo-random bytes from the key (splitmix64): what compression cannot shrink. */
    static byte[] payloadOf(int key, int n) {
        byte[] b = new byte[n];
        long z = key * 0x9E3779B97F4A7C15L;
        for (int i = 0; i < n; i += 8) {
            z += 0x9E3779B97F4A7C15L;
            long x = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            x = (x ^ (x >>> 27)) * 0x94D049BB133111EBL;
            x ^= x >>> 31;
            for (int j = 0; j < 8 && i + j < n; j++) {
                b[i + j] = (byte) (x >>> (8 * j));
            }
        }
        return b;
    }
}
