package ds2.testjob;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * A scalable streaming job to exercise the DS2 autoscaler on a real Flink cluster:
 *
 * <pre>
 *   Source (rate schedule) -> Parse (line -> keys) -> keyBy(key) -> Count (ValueState) -> Sink
 * </pre>
 *
 * Every operator has a stable uid equal to its name ("Source", "Parse", "Count", "Sink"), chaining
 * is off (one job vertex per operator, whatever the parallelisms), and per-operator parallelism comes
 * from the program arguments (Flink 2.3 ignores pipeline.jobvertex-parallelism-overrides). Restore
 * from a savepoint with different parallelisms to rescale; see {@link JobArgs#usage()} for options.
 */
public final class TestJob {
    private TestJob() {}

    public static void main(String[] argv) throws Exception {
        JobArgs args = new JobArgs(argv);
        if (args.help) {
            System.out.print(JobArgs.usage());
            return;
        }
        int maxParallelism = args.getInt("max-parallelism", 1);
        int sourceP = parallelism(args, "source-parallelism", maxParallelism);
        int parseP = parallelism(args, "parse-parallelism", maxParallelism);
        int countP = parallelism(args, "count-parallelism", maxParallelism);
        int sinkP = parallelism(args, "sink-parallelism", maxParallelism);
        int keys = args.getInt("keys", 1);
        int wordsPerRecord = args.getInt("words-per-record", 1);
        RateSchedule schedule =
                args.has("rate")
                        ? RateSchedule.constant(args.getDouble("rate", 0))
                        : RateSchedule.parse(args.get("rate-schedule"));
        long scheduleStartMs =
                args.has("schedule-start-ms")
                        ? args.getLong("schedule-start-ms", 0)
                        : System.currentTimeMillis();
        double batchUs = args.getDouble("wait-batch-us", 1);
        RecordCost parseCost =
                new RecordCost(args.getDouble("parse-wait-us", 0), args.getDouble("parse-cpu-us", 0), batchUs);
        RecordCost countCost =
                new RecordCost(args.getDouble("count-wait-us", 0), args.getDouble("count-cpu-us", 0), batchUs);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.disableOperatorChaining();
        env.setMaxParallelism(maxParallelism);
        if (args.has("checkpoint-interval-ms")) {
            env.enableCheckpointing(args.getLong("checkpoint-interval-ms", 1));
        }

        double skew = args.getDouble("skew", 0);
        if (skew > 1) {
            throw new IllegalArgumentException("--skew must be <= 1, got " + skew);
        }
        SingleOutputStreamOperator<String> lines;
        if (args.has("kafka-topic")) {
            lines = env.fromSource(
                    KafkaIo.source(args.get("kafka-topic"), args.get("kafka-group"),
                            KafkaIo.clientProperties(kafkaClientConfig(args)), args.get("kafka-partition-fetch-bytes")),
                    WatermarkStrategy.noWatermarks(), "Source");
        } else if (args.has("partitions")) {
            PartitionedSource source =
                    new PartitionedSource(
                            args.getInt("partitions", 1), args.getBoolean("backlog"), schedule,
                            scheduleStartMs, keys, wordsPerRecord, skew);
            lines = env.fromSource(source, WatermarkStrategy.noWatermarks(), "Source");
        } else {
            DataGeneratorSource<String> source =
                    new DataGeneratorSource<>(
                            new LineGenerator(keys, wordsPerRecord, skew, schedule, scheduleStartMs, sourceP),
                            Long.MAX_VALUE,
                            new ScheduledRateLimiterStrategy<>(schedule, scheduleStartMs),
                            Types.STRING);
            lines = env.fromSource(source, WatermarkStrategy.noWatermarks(), "Source");
        }
        lines.uid("Source").setParallelism(sourceP);

        DataStream<Tuple2<Integer, Long>> words =
                lines.flatMap(new ParseFunction(parseCost, args.getDouble("parse-fail-after-s", 0)))
                        .uid("Parse")
                        .name("Parse")
                        .setParallelism(parseP);

        DataStream<Tuple2<Integer, Long>> counts =
                words.keyBy(new ByKey())
                        .process(new CountFunction(countCost, args.getInt("state-bytes-per-key", 0)))
                        .uid("Count")
                        .name("Count")
                        .setParallelism(countP);

        if (args.has("kafka-sink-topic")) {
            counts
                    .sinkTo(KafkaIo.sink(args.get("kafka-sink-topic"), KafkaIo.clientProperties(kafkaClientConfig(args))))
                    .uid("Sink")
                    .name("Sink")
                    .setParallelism(sinkP);
        } else {
            counts.sinkTo(new DiscardingSink<>()).uid("Sink").name("Sink").setParallelism(sinkP);
        }

        System.out.printf(
                "%s: schedule %s from %d, parallelism source %d, parse %d, count %d, sink %d, "
                        + "max %d, %d keys (skew %s), partitions %s (backlog %s), kafka %s, parse %s, count %s%n",
                args.get("job-name"), schedule, scheduleStartMs, sourceP, parseP, countP, sinkP,
                maxParallelism, keys, skew, args.get("partitions"), args.get("backlog"), args.get("kafka-topic"), parseCost, countCost);
        env.execute(args.get("job-name"));
    }

    private static String kafkaClientConfig(JobArgs args) {
        if (!args.has("kafka-client-config")) {
            throw new IllegalArgumentException("--kafka-topic and --kafka-sink-topic need --kafka-client-config");
        }
        return args.get("kafka-client-config");
    }

    private static int parallelism(JobArgs args, String name, int maxParallelism) {
        int p = args.getInt(name, 1);
        if (p > maxParallelism) {
            throw new IllegalArgumentException(
                    "--" + name + " " + p + " exceeds --max-parallelism " + maxParallelism);
        }
        return p;
    }

    /** The key of a (key, n) pair. */
    static final class ByKey implements KeySelector<Tuple2<Integer, Long>, Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public Integer getKey(Tuple2<Integer, Long> t) {
            return t.f0;
        }
    }
}
