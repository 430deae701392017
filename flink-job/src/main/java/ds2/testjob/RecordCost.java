package ds2.testjob;

import java.io.Serializable;

/**
 * A configurable per-record processing cost.
 *
 * <ul>
 *   <li>waiting ({@code waitMicros}): like an external lookup; sleeps, batched (one sleep whenever
 *       the owed time reaches {@code batchMicros}, default 1 ms) so the average per record is exactly
 *       the given time whatever the sleep granularity. Flink counts it as busy time, and since it
 *       uses no CPU, throughput scales linearly with parallelism even on a 2-core machine;
 *   <li>CPU ({@code cpuMicros}): spins on the clock; scales only up to the number of cores.
 * </ul>
 *
 * One instance per operator subtask (a copy is deserialized into every subtask).
 */
public final class RecordCost implements Serializable {
    private static final long serialVersionUID = 1L;

    private final long waitNs;
    private final long cpuNs;
    private final long batchNs;
    private long owedNs;

    public RecordCost(double waitMicros, double cpuMicros, double batchMicros) {
        if (waitMicros < 0 || cpuMicros < 0 || batchMicros <= 0) {
            throw new IllegalArgumentException("record costs must be >= 0 and the batch > 0");
        }
        this.waitNs = Math.round(waitMicros * 1000);
        this.cpuNs = Math.round(cpuMicros * 1000);
        this.batchNs = Math.round(batchMicros * 1000);
    }

    public boolean isFree() {
        return waitNs == 0 && cpuNs == 0;
    }

    /** Spends the cost of one record. */
    public void apply() throws InterruptedException {
        if (cpuNs > 0) {
            long end = System.nanoTime() + cpuNs;
            while (System.nanoTime() < end) {
                Thread.onSpinWait();
            }
        }
        if (waitNs > 0) {
            owedNs += waitNs;
            if (owedNs >= batchNs) {
                long t0 = System.nanoTime();
                Thread.sleep(owedNs / 1_000_000L, (int) (owedNs % 1_000_000L));
                // Pay back what was actually slept (often a little more than asked): exact on average.
                owedNs -= System.nanoTime() - t0;
            }
        }
    }

    @Override
    public String toString() {
        return "wait " + waitNs / 1000.0 + " us + cpu " + cpuNs / 1000.0 + " us per record";
    }
}
