package org.apache.flink.metrics.prometheus;

import io.prometheus.client.exporter.HTTPServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.Iterator;
import org.apache.flink.util.PortRange;

/**
 * Flink's Prometheus reporter, serving its metrics on one address instead of every interface.
 *
 * <p>Flink 2.3's {@code PrometheusReporter} binds {@code new InetSocketAddress(port)}: all interfaces, with no
 * setting to narrow it. This one is the same reporter (its collectors, names and labels come from {@link
 * AbstractPrometheusReporter}, whose registry it serves) with a {@code host} to bind. It lives in Flink's package
 * because the registry is package-private; it is installed in the same plugin folder as Flink's reporter, so one
 * class loader holds both.
 */
public final class LoopbackPrometheusReporter extends AbstractPrometheusReporter {
    private final HTTPServer httpServer;
    private final int port;

    LoopbackPrometheusReporter(String host, PortRange ports) {
        HTTPServer server = null;
        int bound = -1;
        Iterator<Integer> candidates = ports.getPortsIterator();
        while (server == null && candidates.hasNext()) {
            int candidate = candidates.next();
            try {
                server = new HTTPServer(new InetSocketAddress(host, candidate), registry);
                bound = candidate;
                log.info("Started the Prometheus reporter on {}:{}.", host, candidate);
            } catch (IOException e) {
                log.debug("Could not start the Prometheus reporter on {}:{}.", host, candidate, e);
            }
        }
        if (server == null) {
            throw new RuntimeException("Could not start the Prometheus reporter on " + host + " and any port in " + ports);
        }
        this.httpServer = server;
        this.port = bound;
    }

    int getPort() {
        return port;
    }

    @Override
    public void close() {
        httpServer.stop();
        super.close();
    }
}
