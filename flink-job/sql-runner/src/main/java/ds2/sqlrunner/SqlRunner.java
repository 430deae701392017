package ds2.sqlrunner;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.StatementSet;
import org.apache.flink.table.api.TableEnvironment;

/**
 * Submits a Flink SQL script as one job, as Flink's SQL client would: {@code SET 'key' = 'value'}
 * statements go into the job's configuration, DDL runs in order, and every {@code INSERT} joins one
 * statement set. The job's operators are the planner's; nothing here is specific to a query.
 *
 * <p>Why a runner: this distribution (PyPI's apache-flink wheels) ships the SQL client without the
 * SQL gateway it embeds, so {@code sql-client.sh} cannot start. Submitting through the REST API's
 * jar-run also lets a restart restore from a savepoint like any other job. The Flink Kubernetes
 * Operator runs SQL the same way (its flink-sql-runner example).
 *
 * <p>Arguments: {@code --sql <statements>} (the script's text) or {@code --file <path>} (read by the
 * JobManager), optionally after {@code --kafka-client-config <path>}: a Kafka client config file
 * ({@code scripts/kafka.sh client-config}) whose values replace the script's {@code ${kafka.<key>}}
 * placeholders, so that a Kafka table's login is never in the script, nor in the job's arguments:
 * {@code ${kafka.bootstrap.servers}}, {@code ${kafka.security.protocol}}, {@code ${kafka.sasl.mechanism}}
 * and {@code ${kafka.sasl.jaas.config}} (built from the file's user and password for the connector's
 * shaded SCRAM login module).
 */
public final class SqlRunner {
    private static final Pattern SET = Pattern.compile("(?is)SET\\s+'([^']+)'\\s*=\\s*'((?:[^']|'')*)'");

    private SqlRunner() {}

    private static final Pattern PLACEHOLDER = Pattern.compile("\\$\\{kafka\\.([a-z.]+)}");
    private static final String SCRAM_LOGIN =
            "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.scram.ScramLoginModule";

    public static void main(String[] args) throws Exception {
        String kafkaConfig = null;
        if (args.length >= 2 && args[0].equals("--kafka-client-config")) {
            kafkaConfig = args[1];
            args = java.util.Arrays.copyOfRange(args, 2, args.length);
        }
        String script = resolveKafka(readScript(args), kafkaConfig);
        TableEnvironment tables = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        StatementSet inserts = tables.createStatementSet();
        int insertCount = 0;
        for (String statement : split(script)) {
            Matcher set = SET.matcher(statement);
            if (set.matches()) {
                tables.getConfig().getConfiguration().setString(set.group(1), set.group(2).replace("''", "'"));
            } else if (statement.regionMatches(true, 0, "INSERT", 0, 6)) {
                inserts.addInsertSql(statement);
                insertCount++;
            } else {
                tables.executeSql(statement);
            }
        }
        if (insertCount == 0) {
            throw new IllegalArgumentException("the SQL script has no INSERT statement: nothing to run");
        }
        inserts.execute();
    }

    private static String readScript(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("--sql")) {
            return args[1];
        }
        if (args.length == 2 && args[0].equals("--file")) {
            return Files.readString(Path.of(args[1]), StandardCharsets.UTF_8);
        }
        throw new IllegalArgumentException("usage: SqlRunner --sql <statements> | --file <path>");
    }

    /** The script with its {@code ${kafka.<key>}} placeholders replaced from the client config. */
    static String resolveKafka(String script, String clientConfig) throws Exception {
        Matcher m = PLACEHOLDER.matcher(script);
        if (!m.find()) {
            return script;
        }
        if (clientConfig == null) {
            throw new IllegalArgumentException("the SQL script uses ${kafka." + m.group(1)
                    + "} but the job has no Kafka client config (--kafka-client-config; kafka_client_config in jobs.yaml)");
        }
        java.util.Properties file = new java.util.Properties();
        try (java.io.Reader r = Files.newBufferedReader(Path.of(clientConfig), StandardCharsets.UTF_8)) {
            file.load(r);
        }
        String user = file.getProperty("sasl.username", "");
        String password = file.getProperty("sasl.password", "");
        if (!user.matches("[A-Za-z0-9._-]*") || !password.matches("[A-Za-z0-9._-]*")) {
            throw new IllegalArgumentException("Kafka client config " + clientConfig
                    + ": sasl.username and sasl.password must be letters, digits, '.', '_' or '-'");
        }
        if (!user.isEmpty()) {
            file.setProperty("sasl.jaas.config",
                    SCRAM_LOGIN + " required username=\"" + user + "\" password=\"" + password + "\";");
        }
        StringBuilder out = new StringBuilder();
        m.reset();
        while (m.find()) {
            String key = m.group(1);
            if (key.equals("sasl.username") || key.equals("sasl.password") || !file.containsKey(key)) {
                throw new IllegalArgumentException("the SQL script's ${kafka." + key + "}: the Kafka client config "
                        + clientConfig + " offers bootstrap.servers, security.protocol, sasl.mechanism and sasl.jaas.config");
            }
            // A SQL string literal: a quote in a value is doubled.
            m.appendReplacement(out, Matcher.quoteReplacement(file.getProperty(key).trim().replace("'", "''")));
        }
        m.appendTail(out);
        return out.toString();
    }

    /** Statements separated by ';', outside quotes and outside '--' comments (which are dropped). */
    static List<String> split(String script) {
        List<String> statements = new ArrayList<>();
        StringBuilder current = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < script.length(); i++) {
            char c = script.charAt(i);
            if (!quoted && c == '-' && i + 1 < script.length() && script.charAt(i + 1) == '-') {
                while (i < script.length() && script.charAt(i) != '\n') {
                    i++;
                }
                current.append('\n');
                continue;
            }
            if (c == '\'') {
                quoted = !quoted;
            }
            if (c == ';' && !quoted) {
                add(statements, current);
            } else {
                current.append(c);
            }
        }
        add(statements, current);
        return statements;
    }

    private static void add(List<String> statements, StringBuilder current) {
        String statement = current.toString().strip();
        if (!statement.isEmpty()) {
            statements.add(statement);
        }
        current.setLength(0);
    }
}
