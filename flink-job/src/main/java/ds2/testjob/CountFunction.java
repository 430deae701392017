package ds2.testjob;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * A running count per key in keyed state (ValueState), paying a configurable per-record cost.
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
    private transient ValueState<Long> count;
    private transient Counter counted;
    private transient volatile long firstCountSeen;

    public CountFunction(RecordCost cost) {
        this.cost = cost;
    }

    @Override
    public void open(OpenContext openContext) {
        count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
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
        long now = (before == null ? 0L : before) + in.f1;
        count.update(now);
        if (firstCountSeen == 0) {
            firstCountSeen = now;
        }
        counted.inc();
        out.collect(Tuple2.of(in.f0, now));
    }
}
