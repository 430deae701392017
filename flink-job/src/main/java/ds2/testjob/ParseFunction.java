package ds2.testjob;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.util.Collector;

/**
 * Splits a line "k12 k345" into (key, 1) pairs, paying an optional per-line cost. With {@code failAfterS} > 0 the
 * first subtask throws that long after each start: a job that fails over by its restart strategy again and again.
 */
public final class ParseFunction extends RichFlatMapFunction<String, Tuple2<Integer, Long>> {
    private static final long serialVersionUID = 1L;

    private final RecordCost cost;
    private final long failAfterNanos;
    private transient long failAtNanos;

    public ParseFunction(RecordCost cost, double failAfterS) {
        this.cost = cost;
        this.failAfterNanos = (long) (failAfterS * 1e9);
    }

    @Override
    public void open(OpenContext openContext) {
        boolean failing = failAfterNanos > 0 && getRuntimeContext().getTaskInfo().getIndexOfThisSubtask() == 0;
        failAtNanos = failing ? System.nanoTime() + failAfterNanos : Long.MAX_VALUE;
    }

    @Override
    public void flatMap(String line, Collector<Tuple2<Integer, Long>> out) throws Exception {
        if (System.nanoTime() >= failAtNanos) {
            throw new IllegalStateException("injected failure (--parse-fail-after-s): Parse subtask 0 fails after every start");
        }
        if (!cost.isFree()) {
            cost.apply();
        }
        int i = 0;
        int n = line.length();
        while (i < n) {
            int end = line.indexOf(' ', i);
            if (end < 0) {
                end = n;
            }
            if (end > i + 1 && line.charAt(i) == 'k') {
                out.collect(Tuple2.of(Integer.parseInt(line, i + 1, end, 10), 1L));
            }
            i = end + 1;
        }
    }
}
