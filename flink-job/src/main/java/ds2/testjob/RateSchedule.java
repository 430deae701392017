package ds2.testjob;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A step function "records per second over time": {@code "0s:20000,120s:30000,240s:10000"} means
 * 20,000/s from the start, 30,000/s from 120 s, 10,000/s from 240 s on. Times accept the units ms,
 * s, m and h (a bare number is seconds); before the first step its rate applies.
 */
public final class RateSchedule implements Serializable {
    private static final long serialVersionUID = 1L;

    private final long[] atMs;
    private final double[] rate;

    private RateSchedule(long[] atMs, double[] rate) {
        this.atMs = atMs;
        this.rate = rate;
    }

    public static RateSchedule constant(double rate) {
        return new RateSchedule(new long[] {0L}, new double[] {rate});
    }

    public static RateSchedule parse(String spec) {
        List<long[]> steps = new ArrayList<>();
        List<Double> rates = new ArrayList<>();
        for (String part : spec.split(",")) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            int colon = p.lastIndexOf(':');
            if (colon <= 0 || colon == p.length() - 1) {
                throw new IllegalArgumentException(
                        "rate schedule step '" + p + "' is not <time>:<records per second>");
            }
            long at = parseDurationMs(p.substring(0, colon).trim());
            double r;
            try {
                r = Double.parseDouble(p.substring(colon + 1).trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("rate schedule step '" + p + "': bad rate");
            }
            if (r < 0 || Double.isNaN(r) || Double.isInfinite(r)) {
                throw new IllegalArgumentException("rate schedule step '" + p + "': rate must be >= 0");
            }
            if (!steps.isEmpty() && at <= steps.get(steps.size() - 1)[0]) {
                throw new IllegalArgumentException(
                        "rate schedule '" + spec + "': step times must increase");
            }
            steps.add(new long[] {at});
            rates.add(r);
        }
        if (steps.isEmpty()) {
            throw new IllegalArgumentException("rate schedule '" + spec + "' has no step");
        }
        long[] a = new long[steps.size()];
        double[] r = new double[steps.size()];
        for (int i = 0; i < a.length; i++) {
            a[i] = steps.get(i)[0];
            r[i] = rates.get(i);
        }
        return new RateSchedule(a, r);
    }

    static long parseDurationMs(String s) {
        String t = s.toLowerCase(Locale.ROOT);
        double factor = 1000;
        if (t.endsWith("ms")) {
            factor = 1;
            t = t.substring(0, t.length() - 2);
        } else if (t.endsWith("s")) {
            t = t.substring(0, t.length() - 1);
        } else if (t.endsWith("m")) {
            factor = 60_000;
            t = t.substring(0, t.length() - 1);
        } else if (t.endsWith("h")) {
            factor = 3_600_000;
            t = t.substring(0, t.length() - 1);
        }
        try {
            double v = Double.parseDouble(t.trim());
            if (v < 0) {
                throw new NumberFormatException();
            }
            return Math.round(v * factor);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad duration '" + s + "' (e.g. 90s, 2m, 500ms)");
        }
    }

    /** Records per second (whole job) at {@code elapsedMs} after the schedule's start. */
    public double rateAt(long elapsedMs) {
        int i = 0;
        while (i + 1 < atMs.length && atMs[i + 1] <= elapsedMs) {
            i++;
        }
        return rate[i];
    }

    /**
     * Records scheduled from the schedule's start to {@code elapsedMs} (the integral of the rate).
     * Before the start the first rate applies, so the value is negative there: only differences
     * between two times are meaningful.
     */
    public double cumulative(long elapsedMs) {
        if (elapsedMs <= atMs[0]) {
            return rate[0] * (elapsedMs - atMs[0]) / 1000.0 + cumulativeAtStep(0);
        }
        int i = 0;
        while (i + 1 < atMs.length && atMs[i + 1] <= elapsedMs) {
            i++;
        }
        return cumulativeAtStep(i) + rate[i] * (elapsedMs - atMs[i]) / 1000.0;
    }

    private double cumulativeAtStep(int step) {
        double total = 0;
        for (int i = 0; i < step; i++) {
            total += rate[i] * (atMs[i + 1] - atMs[i]) / 1000.0;
        }
        return total;
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < atMs.length; i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append(atMs[i]).append("ms:").append(rate[i]);
        }
        return b.toString();
    }
}
