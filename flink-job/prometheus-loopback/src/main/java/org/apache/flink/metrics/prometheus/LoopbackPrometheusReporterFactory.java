package org.apache.flink.metrics.prometheus;

import java.util.Properties;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.reporter.MetricReporterFactory;
import org.apache.flink.util.PortRange;

/**
 * {@code metrics.reporter.<name>.factory.class} of {@link LoopbackPrometheusReporter}: {@code host} (default
 * 127.0.0.1, the loopback) and {@code port} (a port or a range, as Flink's reporter takes it; default 9249).
 */
public final class LoopbackPrometheusReporterFactory implements MetricReporterFactory {
    static final String ARG_HOST = "host";
    static final String ARG_PORT = "port";

    @Override
    public LoopbackPrometheusReporter createMetricReporter(Properties properties) {
        MetricConfig config = (MetricConfig) properties;
        String host = config.getString(ARG_HOST, "127.0.0.1");
        return new LoopbackPrometheusReporter(host, new PortRange(config.getString(ARG_PORT, "9249")));
    }
}
