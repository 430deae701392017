package ds2.testjob;

import java.util.LinkedHashMap;
import java.util.Map;

/** The job's program arguments ({@code --name value} or {@code --name=value}); unknown names fail. */
final class JobArgs {
    /** name -> [default, description]; a null default means "not set". */
    static final Map<String, String[]> OPTIONS = new LinkedHashMap<>();

    static {
        opt("job-name", "ds2-testjob", "job name (track the job by it: every restart gets a new job id)");
        opt("rate", null, "constant source rate, records/s for the whole job (shorthand for --rate-schedule 0s:N)");
        opt("rate-schedule", "0s:20000", "source rate steps <time>:<records/s>,... e.g. 0s:20000,120s:30000,240s:10000");
        opt("schedule-start-ms", null, "epoch ms the schedule's times count from (default: submission time); "
                + "pass the original value when restoring from a savepoint so the schedule continues");
        opt("source-parallelism", "2", "source subtasks (fixed for the job's life; one tops out at ~22-29k records/s)");
        opt("parse-parallelism", "1", "Parse subtasks");
        opt("count-parallelism", "1", "Count subtasks");
        opt("sink-parallelism", "1", "Sink subtasks");
        opt("max-parallelism", "128", "max parallelism (key groups) of the job");
        opt("keys", "10000", "distinct keys (>= 1,000 avoids key skew at parallelism 8)");
        opt("state-bytes-per-key", "0", "bytes of keyed state each key holds besides its count, written when it is first seen "
                + "(the state grows to distinct keys x bytes: a large-state job; 0: the count only)");
        opt("skew", "0", "fraction of all keys drawn that is the one hot key k0 (0: none; 0.3 caps Count's speed-up at 1/0.3)");
        opt("partitions", null, "read from this many partitions that owe their share of the schedule "
                + "(a Kafka-like source reporting pendingRecords; default: the rate-limited generator)");
        opt("backlog", "true", "with --partitions: records not emitted (back-pressure, restarts) are owed and "
                + "emitted as fast as the job allows; false drops what is over 100 ms behind");
        opt("kafka-topic", null, "read lines from this Kafka topic (the Flink Kafka connector) instead of a built-in source");
        opt("kafka-group", "ds2-testjob", "with --kafka-topic: the consumer group");
        opt("kafka-client-config", null, "with --kafka-topic: the client config file (scripts/kafka.sh client-config)");
        opt("kafka-partition-fetch-bytes", null, "with --kafka-topic: the consumer's max.partition.fetch.bytes (Kafka's "
                + "default 1 MiB holds about 100,000 of this job's short lines; pendingRecords is as fresh as the last fetch)");
        opt("kafka-sink-topic", null, "write \"key count\" lines to this Kafka topic (at least once) instead of discarding them");
        opt("words-per-record", "1", "keys per source line: Parse emits this many records per input (selectivity)");
        opt("count-wait-us", "0", "waiting cost per Count record, microseconds (batched sleep; scales with parallelism)");
        opt("count-cpu-us", "0", "CPU cost per Count record, microseconds (busy spin; bounded by the cores)");
        opt("parse-wait-us", "0", "waiting cost per Parse input line, microseconds");
        opt("parse-cpu-us", "0", "CPU cost per Parse input line, microseconds");
        opt("wait-batch-us", "1000", "sleep once the owed waiting time reaches this, microseconds");
        opt("checkpoint-interval-ms", null, "checkpoint interval (default: the cluster's execution.checkpointing.interval)");
        opt("parse-fail-after-s", "0", "fault injection: Parse's first subtask throws this many seconds after every start, "
                + "so the job fails over again and again by its restart strategy (a restart loop; 0: never)");
    }

    private static void opt(String name, String dflt, String help) {
        OPTIONS.put(name, new String[] {dflt, help});
    }

    private final Map<String, String> values = new LinkedHashMap<>();
    final boolean help;

    JobArgs(String[] args) {
        boolean h = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--help") || a.equals("-h")) {
                h = true;
                continue;
            }
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument '" + a + "'\n" + usage());
            }
            String name = a.substring(2);
            String value;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new IllegalArgumentException("--" + name + " needs a value\n" + usage());
            }
            if (!OPTIONS.containsKey(name)) {
                throw new IllegalArgumentException("unknown option --" + name + "\n" + usage());
            }
            values.put(name, value);
        }
        help = h;
    }

    boolean has(String name) {
        return values.containsKey(name);
    }

    String get(String name) {
        String v = values.get(name);
        return v != null ? v : OPTIONS.get(name)[0];
    }

    long getLong(String name, long min) {
        String v = get(name);
        long n;
        try {
            n = Long.parseLong(v.trim().replace("_", ""));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + ": '" + v + "' is not an integer");
        }
        if (n < min) {
            throw new IllegalArgumentException("--" + name + " must be >= " + min + ", got " + n);
        }
        return n;
    }

    int getInt(String name, int min) {
        long n = getLong(name, min);
        if (n > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("--" + name + " is too large: " + n);
        }
        return (int) n;
    }

    boolean getBoolean(String name) {
        String v = get(name).trim().toLowerCase(java.util.Locale.ROOT);
        if (v.equals("true") || v.equals("false")) {
            return v.equals("true");
        }
        throw new IllegalArgumentException("--" + name + ": '" + get(name) + "' is not true or false");
    }

    double getDouble(String name, double min) {
        String v = get(name);
        double d;
        try {
            d = Double.parseDouble(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + name + ": '" + v + "' is not a number");
        }
        if (!(d >= min) || Double.isInfinite(d)) {
            throw new IllegalArgumentException("--" + name + " must be >= " + min + ", got " + v);
        }
        return d;
    }

    static String usage() {
        StringBuilder b = new StringBuilder("options of the DS2 test job (Source -> Parse -> keyBy -> Count -> Sink):\n");
        for (Map.Entry<String, String[]> e : OPTIONS.entrySet()) {
            b.append(String.format("  --%-24s %s", e.getKey(), e.getValue()[1]));
            if (e.getValue()[0] != null) {
                b.append(" [").append(e.getValue()[0]).append(']');
            }
            b.append('\n');
        }
        return b.toString();
    }
}
