package ds2.testjob;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.util.Collector;

/** Splits a line "k12 k345" into (key, 1) pairs, paying an optional per-line cost. */
public final class ParseFunction extends RichFlatMapFunction<String, Tuple2<Integer, Long>> {
    private static final long serialVersionUID = 1L;

    private final RecordCost cost;

    public ParseFunction(RecordCost cost) {
        this.cost = cost;
    }

    @Override
    public void open(OpenContext openContext) {}

    @Override
    public void flatMap(String line, Collector<Tuple2<Integer, Long>> out) throws Exception {
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
